"""CUDA attention through PyTorch's own flash kernel on packed inputs (no per-sequence loop, no sync).

`torch.ops.aten._flash_attention_forward` is the vendored flash-attn 2 varlen kernel that
`torch.nn.attention.varlen.varlen_attn` calls; we call it directly because it speaks flash-attn's
language natively: bottom-right causal, GQA without repeating K/V, sliding windows, `seqused_k`, and —
in recent torch — ALiBi and a paged `block_table`. Which keyword arguments exist is read from the
op's schema at run time, so one code path serves torch 2.5 … 2.13.

Paged KV, the rule (`paged_mode`; every input to it is a shape, a dtype or a host int, never a value
on the device, so a step captured in a CUDA graph replays the same path). Our Triton kernels run only
on real CUDA tensors, with triton installed, for fp16/bf16, power-of-two head_dim, no ALiBi/softcap/
dropout:
- one query per sequence (decode) -> `_paged_decode_triton`, split-KV, reads pages in place, one
  launch per step; it beats the flash kernel on contiguous tensors at the decode shapes of
  benchmarks/bench_attention_gpu.py.
`fast_decode` and `fast_varlen` serve the engines' two hot calls (decode, prefill) with the fewest
host-side operations, before any `Attn` is built: at small batches a step outside a CUDA graph is
bound by host time, not by the GPU. Our Triton kernels launch through `_triton_launch.FastLaunch`
(the JIT's per-call binding done once per key) for the same reason.
- more queries, no sliding window -> `_paged_prefill_triton`, flash-attention forward that looks each
  key tile's page up (about the flash kernel's speed on unpaged K/V, benchmarks/bench_attention_gpu.py;
  eager calls also pay one Triton launch on the host).
- otherwise, when torch exposes `block_table` and pages hold a multiple of 256 tokens -> the flash
  kernel reads the pages itself ('native');
- otherwise -> the pages each sequence may use (`max_seqlen_k` worth) are copied with one
  index_select per tensor into a padded (B, nb * block_size) buffer, the kernel masking the tail with
  `seqused_k` ('gather'; extra memory 2 * B * nb * block_size * Hk * D elements, and a
  full extra pass over the context).
Verified (L3) by tests/gpu/test_replacements_gpu.py on an NVIDIA GPU; nothing here runs in CI.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

import torch

from ._attn import Attn
from ._varlen import blocks_needed, cu_from_lengths

__all__ = ["why_not", "attend", "paged_mode", "fast_decode", "fast_varlen"]


def _op():
    """The kernel entry point (a seam: CPU tests put a flash-semantics emulation here)."""
    return _bound_op()


@lru_cache(maxsize=1)
def _bound_op():
    # the overload's C++ binding itself: calling torch.ops.aten.X goes through two Python __call__
    # frames (packet, overload) that only forward to it — host time on host-bound small calls
    op = torch.ops.aten._flash_attention_forward.default
    return getattr(op, "_op", op)


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
    except ImportError:  # no triton here: decode gathers its pages instead
        return None
    return _paged_decode_triton


@lru_cache(maxsize=1)
def _triton_prefill():
    try:
        from . import _paged_prefill_triton
    except ImportError:  # no triton here: paged prefill gathers its pages instead
        return None
    return _paged_prefill_triton


def _triton_can_run(t: torch.Tensor) -> bool:
    """Whether a Triton kernel can run on `t`: a cuda tensor of this module's callers, which run only on
    the nvidia platform (on the cpu platform `cuda` is the emulated device and _core never comes here).

    Triton being importable says nothing about that (nano-vllm installs it on CPU-only boxes, where a
    launch dies with "0 active drivers"). A seam: the CPU plumbing tests stand in a kernel and say yes.
    """
    return t.device.type == "cuda"


def paged_mode(a: Attn) -> str:
    """How a paged cache is read (the rule in the module docstring): 'triton' (our paged decode kernel,
    one query per sequence), 'triton_prefill' (our paged flash-attention kernel), 'native' (the flash
    kernel reads pages), or 'gather' (pages copied into one padded buffer first)."""
    plain = (
        _triton_can_run(a.q)
        and a.alibi_slopes is None
        and a.dropout_p == 0
        and a.softcap <= 0
        and not a.want_probs
        and a.k.stride(-1) == 1
        and a.v.stride(-1) == 1
        and a.v.shape[-1] == a.q.shape[-1]
    )
    if plain and a.kind == "kvcache" and a.q_len == 1 and a.window[0] < 0:
        # one query at the end of its sequence sees every key under causal or any right window
        tri = _triton_decode()
        if tri is not None and tri.supports(a.q.shape[-1], a.q.dtype):
            return "triton"
    if plain and _plain_mask(a):
        tri = _triton_prefill()
        if tri is not None and tri.supports(a.q.shape[-1], a.q.dtype):
            return "triton_prefill"
    if "block_table" in _schema_args() and a.k.shape[1] % 256 == 0:
        return "native"
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


def _i32(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """int32, contiguous, on `device`; the checks run in Python because even a no-op .to() costs
    microseconds of host time, and these calls are launch-bound."""
    if t.dtype == torch.int32 and t.device == device and t.is_contiguous():
        return t
    return t.to(device=device, dtype=torch.int32).contiguous()


def fast_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seqused: torch.Tensor, scale: float, want_lse: bool,
) -> Optional[tuple[torch.Tensor, Optional[torch.Tensor]]]:
    """The engines' decode step — q (B, 1, Hq, D), a paged cache, every key visible — straight to the
    Triton kernel with the fewest host-side operations (outside a CUDA graph this step is bound by
    host time: every tensor attribute read costs a fraction of a microsecond).

    Returns (out (B, 1, Hq, D), lse (B, Hq) or None unless wanted), or None when this path does not apply — the caller then
    takes the general `Attn` path, which also produces the precise errors for bad shapes.
    """
    tri = _triton_decode()
    if tri is None or not _triton_can_run(q):
        return None
    qs, ks = q.shape, k_cache.shape
    dt = q.dtype
    if (
        len(qs) != 4
        or qs[1] != 1
        or len(ks) != 4
        or ks != v_cache.shape
        or ks[3] != qs[3]
        or qs[2] % ks[2]
        or k_cache.dtype != dt
        or v_cache.dtype != dt
        or k_cache.get_device() != q.get_device()
        or k_cache.stride(-1) != 1
        or v_cache.stride(-1) != 1
        or not tri.supports(qs[3], dt)
        or not scale
        or scale != scale  # NaN: the general path's check() says what is wrong
        or scale in (float("inf"), float("-inf"))
    ):
        return None
    dev = q.device
    table = _i32(block_table, dev)
    return tri.paged_decode(q, k_cache, v_cache, table, _i32(seqused, dev), scale, table.shape[1] * ks[1],
                            want_lse=want_lse)


def fast_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: Optional[torch.Tensor],
    max_q: int, max_k: int, scale: float, causal: bool, block_table: Optional[torch.Tensor],
) -> Optional[torch.Tensor]:
    """The engines' prefill call — packed q; packed K/V, or a paged cache with cu_seqlens_k; the plain
    causal or full mask; no dropout, ALiBi, softcap or probabilities — with the fewest host-side
    operations: what `attend` would run for it, without building and checking an `Attn` (tens of
    microseconds on a call that is host-bound at small batches). None when this path does not apply:
    the caller then takes the general path, which also produces the precise errors for bad input."""
    qs, ks = q.shape, k.shape
    dt = q.dtype
    if (
        (dt is not torch.bfloat16 and dt is not torch.float16)
        or k.dtype != dt
        or v.dtype != dt
        or len(qs) != 3
        or v.shape[:-1] != ks[:-1]
        or v.shape[-1] != qs[2]
        or ks[-1] != qs[2]
        or qs[1] % ks[-2]
        or not scale
        or scale != scale  # NaN
        or scale in (float("inf"), float("-inf"))
        or k.get_device() != q.get_device()
        or v.get_device() != q.get_device()
        or cu_k is None
    ):
        return None
    dev = q.device
    if q.stride(-1) != 1:
        q = q.contiguous()
    if block_table is None:
        if len(ks) != 3 or qs[2] > 256 or qs[2] % 8:
            return None
        return _op()(q, _contig(k), _contig(v), _i32(cu_q, dev), _i32(cu_k, dev), max_q, max_k, 0.0, causal, False,
                     scale=scale)[0]
    tri = _triton_prefill()
    if (
        tri is None
        or len(ks) != 4
        or not _triton_can_run(q)
        or k.stride(-1) != 1
        or v.stride(-1) != 1
        or not tri.supports(qs[2], dt)
    ):
        return None
    # cu_seqlens_k's differences are the cache lengths: the kernel reads it as it is
    return tri.paged_prefill(q, k, v, _i32(block_table, dev), _i32(cu_q, dev), _i32(cu_k, dev), max_q, scale,
                             causal)[0]


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
    dev = q.device
    cu_q = _i32(a.cu_q, dev)
    max_k = a.max_k
    if a.paged:
        table = _i32(a.block_table, dev)
        mode = paged_mode(a)
        if mode == "triton_prefill":
            # the kernel reads cu_seqlens_k itself when that is what defines the lengths (saves launches)
            keys = a.seqused_k if a.seqused_k is not None or a.cu_k is None else a.cu_k
            out, lse = _triton_prefill().paged_prefill(q, a.k, a.v, table, cu_q, _i32(keys, dev), a.max_q,
                                                       a.scale, bool(a.causal))
            return out, (lse if a.want_lse else None), None
        lens = _i32(a.key_lengths(), dev)
        if mode == "triton":
            out, lse = _triton_decode().paged_decode(
                q.view(a.batch, q.shape[1], q.shape[2]), a.k, a.v, table, lens, a.scale, a.max_k, want_lse=a.want_lse
            )  # q (B, Hq, D) -> out (B, Hq, D), lse (B, Hq)
            return out, (lse.transpose(0, 1) if lse is not None else None), None
        if mode == "native":
            k, v = _contig(a.k), _contig(a.v)
            cu_k = _i32(a.cu_k, dev) if a.cu_k is not None else cu_from_lengths(lens)
            kw["block_table"] = table
        else:
            bs = a.k.shape[1]
            nb = min(blocks_needed(a.max_k, bs), table.shape[1])
            # one index per page, shared by k and v; padding (-1) reads page 0, masked by seqused_k.
            # index_select takes int32 indices: no .long() copy
            ids = (table if nb == table.shape[1] else table[:, :nb]).reshape(-1).clamp_min(0)
            k = a.k.index_select(0, ids).view(a.batch * nb * bs, *a.k.shape[2:])
            v = a.v.index_select(0, ids).view(a.batch * nb * bs, *a.v.shape[2:])
            cu_k = torch.arange(0, (a.batch + 1) * nb * bs, nb * bs, dtype=torch.int32, device=dev)
            max_k = nb * bs
        kw["seqused_k"] = lens
    else:
        k, v = _contig(a.k), _contig(a.v)
        assert a.cu_k is not None
        cu_k = _i32(a.cu_k, dev)
        if a.seqused_k is not None:
            kw["seqused_k"] = _i32(a.seqused_k, dev)
    is_causal = bool(a.causal)  # the varlen kernel's causal is bottom-right, as flash-attn's
    out, lse = _op()(
        q, k, v, cu_q, cu_k, int(a.max_q), int(max_k), float(a.dropout_p), is_causal, False, **kw
    )[:2]
    return out, (lse if a.want_lse else None), None
