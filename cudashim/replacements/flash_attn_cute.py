"""Drop-in `flash_attn.cute.interface._flash_attn_fwd` (flash-attn 4) for the varlen vision path.

The seed engine's ViT calls it non-causal over images packed along one token axis (TND) with
`cu_seqlens_q` — sometimes a host list of cumulative segment ends without the leading 0 — and unpacks
`(out, lse)`. Same signature and return as upstream: `(out, lse)` with lse None unless return_lse;
`out` is written into when given. When only cu_seqlens_q is given and k is packed (3-D), the key
segments are the query segments (self-attention), as the seed engine relies on.

On ascend (L0, written against torch-npu 2.13.0's docs) this is
`torch_npu.npu_fusion_attention(q, k, v, heads, "TND", scale=…, actual_seq_qlen=…, actual_seq_kvlen=…,
sparse_mode=0)`; on cpu and CUDA the shared varlen paths (see `_core`).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Tuple, Union

import torch

from ._attn import Attn, unsupported
from ._core import attend

__all__ = ["_flash_attn_fwd"]

_API = "flash_attn.cute.interface._flash_attn_fwd"


def _as_cu(cu: Union[torch.Tensor, Sequence[int]], device: torch.device) -> torch.Tensor:
    """flash-attn (B+1,) offsets from a tensor, or from a host list with or without the leading 0."""
    if isinstance(cu, torch.Tensor):
        return cu.to(device=device, dtype=torch.int32)
    vals = [int(x) for x in cu]
    if not vals or vals[0] != 0:
        vals = [0] + vals
    return torch.tensor(vals, dtype=torch.int32, device=device)


def _max_len(cu: torch.Tensor) -> int:
    return int((cu[1:] - cu[:-1]).max().item()) if cu.numel() > 1 else 0


def _flash_attn_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
    seqused_q: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    page_table: Optional[torch.Tensor] = None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    softcap: Optional[float] = None,
    window_size_left: Optional[int] = None,
    window_size_right: Optional[int] = None,
    learnable_sink: Optional[torch.Tensor] = None,
    m_block_size: int = 128,
    n_block_size: int = 128,
    num_threads: int = 384,
    num_splits: int = 1,
    pack_gqa: Optional[bool] = None,
    _arch: Optional[int] = None,
    score_mod: Optional[Callable] = None,
    mask_mod: Optional[Callable] = None,
    block_sparse_tensors: Optional[object] = None,
    cu_total_m_blocks: Optional[torch.Tensor] = None,
    cu_total_n_blocks: Optional[torch.Tensor] = None,
    return_lse: bool = False,
    out: Optional[torch.Tensor] = None,
    lse: Optional[torch.Tensor] = None,
    aux_tensors: Optional[list] = None,
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """flash-attn 4's forward. Tuning knobs (block sizes, threads, splits, pack_gqa, _arch) are ignored."""
    for name, value in (
        ("seqused_q", seqused_q),
        ("learnable_sink", learnable_sink),
        ("score_mod", score_mod),
        ("mask_mod", mask_mod),
        ("block_sparse_tensors", block_sparse_tensors),
        ("aux_tensors", aux_tensors),
    ):
        if value is not None:
            raise unsupported(_API, name, "cudashim replacement", f"pass {name}=None or install flash-attn 4 on a CUDA box")
    dev = q.device
    if cu_seqlens_q is not None:
        cu_q = _as_cu(cu_seqlens_q, dev)
        batch = cu_q.numel() - 1
        qq = q
        mq = int(max_seqlen_q) if max_seqlen_q is not None else _max_len(cu_q)
    else:
        batch, sq = q.shape[:2]
        cu_q = torch.arange(0, (batch + 1) * sq, sq, dtype=torch.int32, device=dev)
        qq = q.reshape(batch * sq, *q.shape[2:])
        mq = sq
    cu_k = None
    used = seqused_k.to(device=dev, dtype=torch.int32) if seqused_k is not None else None
    kk, vv = k, v
    if page_table is not None:
        cap = page_table.shape[1] * k.shape[1]
        if used is None:
            used = torch.full((batch,), cap, dtype=torch.int32, device=dev)
        mk = cap
    elif cu_seqlens_k is not None:
        cu_k = _as_cu(cu_seqlens_k, dev)
        mk = int(max_seqlen_k) if max_seqlen_k is not None else _max_len(cu_k)
    elif k.dim() == 3:  # packed k with only cu_seqlens_q: key segments are the query segments
        cu_k = cu_q
        mk = mq
    else:
        sk = k.shape[1]
        cu_k = torch.arange(0, (batch + 1) * sk, sk, dtype=torch.int32, device=dev)
        kk = k.reshape(batch * sk, *k.shape[2:])
        vv = v.reshape(batch * sk, *v.shape[2:])
        mk = sk
    left = -1 if window_size_left is None or window_size_left < 0 else int(window_size_left)
    right = -1 if window_size_right is None or window_size_right < 0 else int(window_size_right)
    if causal:
        right = 0
    a = Attn(
        api=_API,
        q=qq,
        k=kk,
        v=vv,
        cu_q=cu_q,
        max_q=mq,
        max_k=mk,
        cu_k=cu_k,
        seqused_k=used,
        block_table=page_table,
        scale=float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1]),
        causal=bool(causal),
        window=(left, right),
        softcap=float(softcap or 0.0),
        want_lse=bool(return_lse),
    )
    res, res_lse, _ = attend(a)
    if cu_seqlens_q is None:
        res = res.view(batch, -1, *res.shape[1:])
        if res_lse is not None:
            res_lse = res_lse.view(res_lse.shape[0], batch, -1).transpose(0, 1)
    if out is not None:
        out.copy_(res)
        res = out
    if res_lse is not None and lse is not None:
        lse.copy_(res_lse)
        res_lse = lse
    return res, res_lse
