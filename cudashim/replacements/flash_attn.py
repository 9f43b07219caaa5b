"""Drop-in flash-attn 2.x API: `flash_attn_func`, `flash_attn_varlen_func`, `flash_attn_with_kvcache`.

Same signatures, defaults and return conventions as flash-attn 2's `flash_attn_interface.py`; what the
built-in patch pack binds to `flash_attn:*` on ascend, on cpu, and on nvidia where flash-attn is absent.
Semantics kept: bottom-right causal alignment, MQA/GQA, softmax_scale, window_size, softcap,
alibi_slopes, LSE / attention probabilities, paged KV (`block_table`) in the varlen prefill and in the
KV-cache call, in-place append of new k/v at `cache_seqlens`, rotary on q/k in the KV-cache call.

Verification: cpu path L3 (CI, against a float64 reference); CUDA path L3 on an NVIDIA GPU by
tests/gpu/test_replacements_gpu.py; ascend path L0 (built against torch-npu 2.13.0's operator docs,
its argument plumbing checked against a recording stand-in of torch_npu and its results against the
float64 oracle with CPU implementations of the documented operators standing in — never run on an NPU here).
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from ..platform import contract as _platform
from . import _attn_cuda, _attn_graph
from ._attn import Attn, normalize_window, unsupported
from ._core import attend
from ._rotary import apply_rotary
from ._varlen import paged_slots

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache"]


def _scale(q: torch.Tensor, softmax_scale: Optional[float]) -> float:
    return float(softmax_scale) if softmax_scale is not None else q.shape[-1] ** (-0.5)


def _arange_cu(batch: int, step: int, device: torch.device) -> torch.Tensor:
    return torch.arange(0, (batch + 1) * step, step, dtype=torch.int32, device=device)


def _masking(q: torch.Tensor, softmax_scale, causal, window: tuple[int, int], softcap, alibi_slopes) -> dict:
    """The Attn fields every entry point fills alike from flash-attn's scale/mask keywords."""
    return dict(
        scale=_scale(q, softmax_scale),
        causal=bool(causal),
        window=window,
        softcap=float(softcap or 0.0),
        alibi_slopes=alibi_slopes,
    )


def _dense(out: torch.Tensor, lse: Optional[torch.Tensor], batch: int, sq: int, hq: int):
    """Packed (B*Sq, H, Dv) / lse (H, B*Sq) -> flash-attn's dense (B, Sq, H, Dv) / (B, H, Sq)."""
    return out.view(batch, sq, hq, -1), None if lse is None else lse.view(hq, batch, sq).transpose(0, 1)


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1 means infinite context window
    softcap=0.0,  # 0.0 means deactivated
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash-attn's `flash_attn_func`: q (B, Sq, H, D), k/v (B, Sk, Hk, D) -> out (B, Sq, H, Dv).

    With return_attn_probs: (out, softmax_lse (B, H, Sq), S_dmask (B, H, Sq, Sk)); the probabilities
    are for testing only, as upstream says.
    """
    batch, sq, hq, _ = q.shape
    sk = k.shape[1]
    a = Attn(
        api="flash_attn_func",
        q=q.reshape(batch * sq, hq, q.shape[-1]),
        k=k.reshape(batch * sk, *k.shape[2:]),
        v=v.reshape(batch * sk, *v.shape[2:]),
        cu_q=_arange_cu(batch, sq, q.device),
        cu_k=_arange_cu(batch, sk, q.device),
        max_q=sq,
        max_k=sk,
        **_masking(q, softmax_scale, causal, normalize_window(window_size, bool(causal)), softcap, alibi_slopes),
        dropout_p=float(dropout_p),
        want_lse=bool(return_attn_probs),
        want_probs=bool(return_attn_probs),
        kind="dense",
        q_len=sq,
    )
    out, lse, probs = attend(a)
    out, lse = _dense(out, lse, batch, sq, hq)
    return (out, lse, probs) if return_attn_probs else out


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1 means infinite context window
    softcap=0.0,  # 0.0 means deactivated
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """flash-attn's `flash_attn_varlen_func`: q (total_q, H, D) packed by cu_seqlens_q.

    k/v are packed (total_k, Hk, D) by cu_seqlens_k, or — with block_table (B, max_blocks) — the paged
    cache (num_blocks, block_size, Hk, D), cu_seqlens_k then giving each sequence's cache length
    (prefix caching, nano-vllm's prefill). With return_attn_probs: (out, softmax_lse (H, total_q), S_dmask).
    """
    if (
        # the engines' prefill: checked first, with the fewest attribute reads (fast_varlen declines
        # anything it does not serve exactly, and the general path below handles it)
        q.device.type == "cuda"  # not is_cuda: transfer_to_npu makes npu tensors say True
        and not return_attn_probs
        and not dropout_p
        and alibi_slopes is None
        and not softcap
        and (window_size is None or (type(window_size[0]) is int and window_size[0] < 0
                                     and (causal or (type(window_size[1]) is int and window_size[1] < 0))))
        and _platform.platform_name() == "nvidia"  # cuda tensors of ascend/the emulated cpu device: no flash kernel
    ):
        out = _attn_cuda.fast_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k),
                                     _scale(q, softmax_scale), bool(causal), block_table)
        if out is not None:
            return out
    a = Attn(
        api="flash_attn_varlen_func",
        q=q,
        k=k,
        v=v,
        cu_q=cu_seqlens_q,
        max_q=int(max_seqlen_q),
        max_k=int(max_seqlen_k),
        # with block_table, cu_seqlens_k gives each sequence's cache length: paths that need the
        # lengths as a tensor take Attn.key_lengths() (its diff), computed only where needed
        cu_k=cu_seqlens_k,
        block_table=block_table,
        **_masking(q, softmax_scale, causal, normalize_window(window_size, bool(causal)), softcap, alibi_slopes),
        dropout_p=float(dropout_p),
        want_lse=bool(return_attn_probs),
        want_probs=bool(return_attn_probs),
    )
    out, lse, probs = attend(a)
    return (out, lse, probs) if return_attn_probs else out


def _append_kv(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache_seqlens: torch.Tensor,
    cache_batch_idx: Optional[torch.Tensor],
    block_table: Optional[torch.Tensor],
) -> None:
    """Write k/v (B, S_new, Hk, D) into the cache at positions cache_seqlens[b] + t, in place."""
    batch, s_new = k.shape[:2]
    dev = k_cache.device
    pos = cache_seqlens.to(dev).long().view(batch, 1) + torch.arange(s_new, device=dev).view(1, s_new)
    bidx = torch.arange(batch, device=dev).view(batch, 1).expand(batch, s_new)
    if block_table is not None:
        bs = k_cache.shape[1]
        slots = paged_slots(block_table.to(dev), pos.reshape(-1), bidx.reshape(-1), bs)
        rows, cols = slots // bs, slots % bs
    else:
        rows = (bidx if cache_batch_idx is None else cache_batch_idx.to(dev).long().view(batch, 1).expand(batch, s_new))
        rows, cols = rows.reshape(-1), pos.reshape(-1)
    # advanced-index assignment writes through any strides, so the caller's cache tensor is updated
    k_cache[rows, cols] = k.reshape(batch * s_new, *k.shape[2:]).to(k_cache.dtype)
    v_cache[rows, cols] = v.reshape(batch * s_new, *v.shape[2:]).to(v_cache.dtype)


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens: Optional[Union[(int, torch.Tensor)]] = None,
    cache_batch_idx: Optional[torch.Tensor] = None,
    cache_leftpad: Optional[torch.Tensor] = None,
    block_table: Optional[torch.Tensor] = None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),  # -1 means infinite context window
    softcap=0.0,  # 0.0 means deactivated
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """flash-attn's `flash_attn_with_kvcache`: q (B, Sq, H, D) against a (paged) KV cache.

    New k/v (B, S_new, Hk, D) are written into k_cache/v_cache IN PLACE at cache_seqlens (after rotary,
    when rotary_cos/rotary_sin are given), then attention runs over cache_seqlens + S_new keys.
    Returns out (B, Sq, H, Dv), or (out, softmax_lse (B, H, Sq)) with return_softmax_lse.
    """
    if (
        # the engines' decode step, checked first and with the fewest tensor attribute reads: outside a
        # CUDA graph it is bound by host time (fast_decode declines anything it does not serve exactly)
        block_table is not None
        and k is None
        and v is None
        and rotary_cos is None
        and cache_leftpad is None
        and alibi_slopes is None
        and not softcap
        and q.device.type == "cuda"  # not is_cuda: transfer_to_npu makes npu tensors say True
        and isinstance(cache_seqlens, torch.Tensor)
        and (window_size is None or (type(window_size[0]) is int and window_size[0] < 0))  # every key visible
        and _platform.platform_name() == "nvidia"  # cuda tensors of ascend/the emulated cpu device: no flash kernel
    ):
        fast = _attn_cuda.fast_decode(q, k_cache, v_cache, block_table, cache_seqlens, _scale(q, softmax_scale),
                                      bool(return_softmax_lse))
        if fast is not None:
            out, lse = fast
            return (out, lse.unsqueeze(-1)) if return_softmax_lse else out
    if (  # a decode step captured into a CUDA graph on the emulated device: no host reads of the lengths
        block_table is not None and k is None and rotary_cos is None and cache_leftpad is None and alibi_slopes is None
        and not softcap and q.shape[1] == 1 and isinstance(cache_seqlens, torch.Tensor) and _attn_graph.capturing(q)
    ):
        out, lse = _attn_graph.paged_decode(q, k_cache, v_cache, block_table, cache_seqlens, _scale(q, softmax_scale))
        return (out, lse.unsqueeze(-1)) if return_softmax_lse else out
    api = "flash_attn_with_kvcache"
    if cache_leftpad is not None:
        raise unsupported(api, "cache_leftpad", "portable/ascend", "left-align the cache (cache_leftpad=None)")
    if (k is None) != (v is None):
        raise ValueError(f"{api}: pass both k and v to append to the cache, or neither")
    batch, sq, hq, d = q.shape
    paged = block_table is not None
    cap = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]
    if cache_seqlens is None:
        if k is not None:
            raise ValueError(f"{api}: cache_seqlens is required to know where to append k/v")
        cache_seqlens = cap
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    elif cache_seqlens.device != q.device:
        cache_seqlens = cache_seqlens.to(q.device)
    window = normalize_window(window_size, bool(causal))
    s_new = 0
    if k is not None:
        s_new = k.shape[1]
        if rotary_cos is not None:
            q, k = apply_rotary(
                q, k, rotary_cos, rotary_sin, cache_seqlens, rotary_interleaved,
                q_positions_advance=bool(causal) or window != (-1, -1),
            )
        _append_kv(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, block_table)
    elif rotary_cos is not None:
        raise ValueError(f"{api}: rotary_cos/rotary_sin apply only when new k and v are passed")
    if s_new == 0 and cache_seqlens.dtype == torch.int32:
        seqused = cache_seqlens  # the decode step: no arithmetic, no copy (it is launch-bound)
    else:
        seqused = (cache_seqlens.long() + s_new).to(torch.int32)
    if paged:
        kk, vv, cu_k = k_cache, v_cache, None
    else:
        kk, vv = k_cache, v_cache
        if cache_batch_idx is not None:
            kk = kk.index_select(0, cache_batch_idx.to(kk.device).long())
            vv = vv.index_select(0, cache_batch_idx.to(vv.device).long())
        else:  # a cache allocated for more sequences than this batch: rows 0..B-1, as flash-attn reads
            kk, vv = kk[:batch], vv[:batch]
        sc = kk.shape[1]
        kk = kk.reshape(batch * sc, *kk.shape[2:])
        vv = vv.reshape(batch * sc, *vv.shape[2:])
        cu_k = _arange_cu(batch, sc, q.device)
    a = Attn(
        api=api,
        q=q.reshape(batch * sq, hq, d),
        k=kk,
        v=vv,
        cu_q=_arange_cu(batch, sq, q.device),
        max_q=sq,
        max_k=cap,
        cu_k=cu_k,
        seqused_k=seqused,
        block_table=block_table,
        **_masking(q, softmax_scale, causal, window, softcap, alibi_slopes),
        want_lse=bool(return_softmax_lse),
        num_splits=int(num_splits or 0),
        kind="kvcache",
        q_len=sq,
    )
    out, lse, _ = attend(a)
    out, lse = _dense(out, lse, batch, sq, hq)
    return (out, lse) if return_softmax_lse else out
