"""CUDA attention through PyTorch's own flash kernel on packed inputs (no per-sequence loop, no sync).

`torch.ops.aten._flash_attention_forward` is the vendored flash-attn 2 varlen kernel that
`torch.nn.attention.varlen.varlen_attn` calls; we call it directly because it speaks flash-attn's
language natively: bottom-right causal, GQA without repeating K/V, sliding windows, `seqused_k`, and —
in recent torch — ALiBi and a paged `block_table`. Which keyword arguments exist is read from the
op's schema at run time, so one code path serves torch 2.5 … 2.13.

Paged KV: the kernel reads pages itself when torch exposes `block_table` and the page size is a
multiple of 256 (flash-attn 2's constraint); otherwise single-query decode goes to our Triton paged
kernel (`_paged_decode_triton`, when triton is installed), and everything else gathers the pages each
sequence uses into one padded buffer with a single index_select, the kernel masking the tail with
`seqused_k`.
Verified (L3) by tests/device/test_npu_ops_gpu.py on an H200; nothing here runs in CI.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

import torch

from ._core import Attn
from ._varlen import blocks_needed, cu_from_lengths, gather_paged_padded

__all__ = ["why_not", "attend", "paged_mode"]


def _op():
    """The kernel entry point (a seam: CPU tests put a flash-semantics emulation here)."""
    return torch.ops.aten._flash_attention_forward


@lru_cache(maxsize=1)
def _schema_args() -> frozenset[str]:
    try:
        return frozenset(arg.name for arg in torch.ops.aten._flash_attention_forward.default._schema.arguments)
    except (AttributeError, RuntimeError):
        return frozenset()


@lru_cache(maxsize=1)
def _triton_decode():
    try:
        from . import _paged_decode_triton
    except ImportError:  # no triton on this box: decode gathers its pages instead
        return None
    return _paged_decode_triton


def paged_mode(a: Attn) -> str:
    """How a paged cache is read: 'native' (the flash kernel reads pages), 'triton' (our paged decode
    kernel, one query per sequence), or 'gather' (pages copied into one padded buffer first)."""
    if "block_table" in _schema_args() and a.k.shape[1] % 256 == 0:
        return "native"
    tri = _triton_decode()
    if (
        tri is not None
        and a.kind == "kvcache"
        and a.q_len == 1
        and a.alibi_slopes is None
        and a.dropout_p == 0
        and a.window[0] < 0
        and tri.supports(a.q.shape[-1], a.q.dtype)
    ):
        return "triton"
    return "gather"


def _plain_mask(a: Attn) -> bool:
    """No window beyond what is_causal already says."""
    return a.window == (-1, -1) or (a.causal and a.window == (-1, 0))


def why_not(a: Attn) -> Optional[str]:
    """None when the flash kernel computes exactly what `a` asks; else the reason it cannot."""
    args = _schema_args()
    if not args:
        return "this torch build has no aten._flash_attention_forward"
    if a.q.dtype not in (torch.float16, torch.bfloat16):
        return f"dtype {a.q.dtype} is not fp16/bf16 (the flash kernel's dtypes)"
    if a.k.dtype != a.q.dtype or a.v.dtype != a.q.dtype:
        return "q, k and v have different dtypes"
    d = a.q.shape[-1]
    if d > 256 or d % 8:
        return f"head_dim {d} (the flash kernel takes multiples of 8 up to 256)"
    if a.v.shape[-1] != d:
        return "head_dim of v differs from q/k"
    if a.softcap > 0:
        return "softcap is not exposed by torch's flash kernel"
    if a.want_probs:
        return "return_attn_probs needs the explicit probabilities"
    if a.alibi_slopes is not None and "alibi_slopes" not in args:
        return "alibi_slopes is not exposed by this torch's flash kernel"
    if "seqused_k" not in args and (a.seqused_k is not None or a.paged):
        return "seqused_k is not exposed by this torch's flash kernel"
    if not _plain_mask(a) and "window_size_left" not in args:
        return "window_size is not exposed by this torch's flash kernel"
    if a.q.device.type != "cuda" or a.k.device != a.q.device:
        return "tensors are not all on one CUDA device"
    return None


def _contig(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def attend(a: Attn) -> tuple[torch.Tensor, Optional[torch.Tensor], None]:
    args = _schema_args()
    q = _contig(a.q)
    kw: dict = {"scale": a.scale}
    left, right = a.window
    if not _plain_mask(a):
        # only real windows go down as windows: plain causal stays is_causal, so the kernel keeps its
        # decode fast paths (causal is dropped for one query; GQA heads are folded into the M dim)
        kw["window_size_left"] = left
        kw["window_size_right"] = right
    if a.alibi_slopes is not None:
        kw["alibi_slopes"] = a.alibi_slopes.float().contiguous()
    if a.num_splits > 0 and "num_splits" in args:
        kw["num_splits"] = a.num_splits
    cu_q = a.cu_q.to(device=q.device, dtype=torch.int32)
    max_k = a.max_k
    if a.paged:
        lens = a.key_lengths().to(device=q.device, dtype=torch.int32)
        table = a.block_table.to(device=q.device, dtype=torch.int32).contiguous()
        mode = paged_mode(a)
        if mode == "triton":
            out, lse = _triton_decode().paged_decode(
                q.view(a.batch, q.shape[1], q.shape[2]), a.k, a.v, table, lens, a.scale, a.max_k
            )
            return out, (lse.transpose(0, 1) if a.want_lse else None), None
        if mode == "native":
            k, v = _contig(a.k), _contig(a.v)
            cu_k = a.cu_k.to(device=q.device, dtype=torch.int32) if a.cu_k is not None else cu_from_lengths(lens)
            kw["block_table"] = table
        else:
            bs = a.k.shape[1]
            nb = min(blocks_needed(a.max_k, bs), table.shape[1])
            k = gather_paged_padded(a.k, table, nb).flatten(0, 1)
            v = gather_paged_padded(a.v, table, nb).flatten(0, 1)
            cu_k = torch.arange(0, (a.batch + 1) * nb * bs, nb * bs, dtype=torch.int32, device=q.device)
            max_k = nb * bs
        kw["seqused_k"] = lens
    else:
        k, v = _contig(a.k), _contig(a.v)
        assert a.cu_k is not None
        cu_k = a.cu_k.to(device=q.device, dtype=torch.int32)
        if a.seqused_k is not None:
            kw["seqused_k"] = a.seqused_k.to(device=q.device, dtype=torch.int32)
    is_causal = bool(a.causal)  # the varlen kernel's causal is bottom-right, as flash-attn's
    out, lse = _op()(
        q, k, v, cu_q, cu_k, int(a.max_q), int(max_k), float(a.dropout_p), is_causal, False, **kw
    )[:2]
    return out, (lse if a.want_lse else None), None
