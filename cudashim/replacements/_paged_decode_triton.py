"""Paged-KV decode attention in Triton (split-KV "flash decoding"), reading the pages in place.

torch's flash kernel (2.11) cannot read pages: decode through it would first gather every page into a
dense buffer, tripling the memory traffic of a memory-bound step. This kernel reads pages where they
are; benchmarks/bench_attention_gpu.py compares it with the flash kernel on contiguous tensors.

One program per (sequence, kv head, split): it loads the GROUP query heads that share the kv head
(GQA: K/V are read once for all of them), walks its share of the sequence BLOCK_N tokens at a time —
each token's page looked up in the block table — with an online softmax in float32, and writes a
partial output and LSE; the last program of each (sequence, kv head) to finish — an atomic count tells
it — merges the splits, so a decode step is one launch (outside a CUDA graph it is bound by host
time, and each launch costs more host time than the GPU work of a small batch). Under CUDA-graph
capture a second small kernel merges instead; no split at all when one split per (sequence, kv head)
already fills the GPU. One query per sequence (decode): with one query, flash-attn's bottom-right
causal mask allows every cached key.

Imported only on CUDA when triton is installed; L3 by tests/gpu/test_replacements_gpu.py (an NVIDIA GPU), and
its arithmetic runs in CI-less form under TRITON_INTERPRET=1 (tests/replacements/test_paged_triton_interpreted.py).
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl
from triton.runtime.driver import driver

from ._triton_launch import FastLaunch

__all__ = ["paged_decode", "supports", "num_splits"]

_BLOCK_N = 64


@triton.jit
def _split_kernel(
    Q, K, V, BT, LENS, OUT, LSE, WS, CNT,
    scale, chunk, stride_bt,
    PAGE: tl.constexpr, GROUP: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    SK0: tl.constexpr, SK1: tl.constexpr, SK2: tl.constexpr,
    SV0: tl.constexpr, SV1: tl.constexpr, SV2: tl.constexpr,
    MODE: tl.constexpr, WRITE_LSE: tl.constexpr, S_PAD: tl.constexpr,
):
    # Q and OUT (B, Hq, D), LSE (B, Hq) are contiguous; Hq and the number of splits S come from the grid
    # (B, Hk, S). The caches' strides are constexprs: fixed per model, and the fewer runtime arguments,
    # the cheaper each launch is on the host (see _triton_launch.py).
    # MODE 0 (S == 1): the program's result is final. MODE 1: partial results go to WS, laid out as
    # (B, Hq, S, D) outputs then (B, Hq, S) LSEs, for _combine_kernel. MODE 2: the same, and the
    # program that finishes last for its (sequence, kv head) — counted in CNT, which it then resets —
    # merges the splits itself: one launch per decode step.
    b = tl.program_id(0)
    hk = tl.program_id(1)
    s = tl.program_id(2)
    hq_all = tl.num_programs(1) * GROUP
    n_s = tl.num_programs(2)
    seqlen = tl.load(LENS + b)
    start = s * chunk
    end = tl.minimum(start + chunk, seqlen)
    g = tl.arange(0, G_PAD)
    d = tl.arange(0, D)
    gmask = g < GROUP
    heads = b * hq_all + hk * GROUP + g  # row of each query head in (B, Hq)
    q = tl.load(Q + heads[:, None] * D + d[None, :], mask=gmask[:, None], other=0.0)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for t0 in range(start, end, BLOCK_N):
        t = t0 + tl.arange(0, BLOCK_N)
        tmask = t < end
        page = tl.load(BT + b * stride_bt + t // PAGE, mask=tmask, other=0).to(tl.int64)
        off = t % PAGE
        k = tl.load(K + page[:, None] * SK0 + off[:, None] * SK1 + hk * SK2 + d[None, :],
                    mask=tmask[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * scale
        qk = tl.where(tmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + page[:, None] * SV0 + off[:, None] * SV1 + hk * SV2 + d[None, :],
                    mask=tmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    nonempty = l_i > 0
    l_safe = tl.where(nonempty, l_i, 1.0)
    out = acc / l_safe[:, None]
    if MODE == 0:
        tl.store(OUT + heads[:, None] * D + d[None, :], out.to(OUT.dtype.element_ty), mask=gmask[:, None])
        if WRITE_LSE:
            tl.store(LSE + heads, tl.where(nonempty, m_i + tl.log(l_safe), float("inf")), mask=gmask)  # flash-attn: +inf for no keys
    else:
        ws_lse = WS + tl.num_programs(0) * hq_all * n_s * D
        tl.store(WS + (heads * n_s + s)[:, None] * D + d[None, :], out, mask=gmask[:, None])
        tl.store(ws_lse + heads * n_s + s, tl.where(nonempty, m_i + tl.log(l_safe), float("-inf")), mask=gmask)
        if MODE == 2:
            tl.debug_barrier()  # every thread's partial is written before the count says so (release)
            done = tl.atomic_add(CNT + b * tl.num_programs(1) + hk, 1, sem="acq_rel", scope="gpu")
            if done == n_s - 1:  # the last split of this (sequence, kv head): all partials are visible
                _merge(WS, ws_lse, OUT, LSE, b * hq_all + hk * GROUP, n_s, GROUP, S_PAD, D, WRITE_LSE)
                tl.atomic_xchg(CNT + b * tl.num_programs(1) + hk, 0)  # ready for the next step


@triton.jit
def _merge(WS, WS_LSE, OUT, LSE, row0, n_s, ROWS: tl.constexpr, S_PAD: tl.constexpr, D: tl.constexpr,
           WRITE_LSE: tl.constexpr):
    """For rows row0 .. row0+ROWS-1 of (B * Hq): out = sum_s w_s * part_s / sum_s w_s, with
    w_s = exp(lse_s - max lse) over the n_s splits, all splits of a row loaded at once.

    The partials are read from L2 (.cg): other programs wrote them, and this SM's L1 may hold stale
    lines of the same addresses from an earlier step's buffer.
    """
    s = tl.arange(0, S_PAD)
    d = tl.arange(0, D)
    smask = s < n_s
    for g in tl.static_range(ROWS):
        row = row0 + g
        lse_s = tl.load(WS_LSE + row * n_s + s, mask=smask, other=float("-inf"), cache_modifier=".cg")
        m = tl.max(lse_s, 0)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        w = tl.exp(lse_s - m_safe)  # empty splits (and padding) weigh 0
        total = tl.sum(w, 0)
        parts = tl.load(WS + (row * n_s + s[:, None]) * D + d[None, :], mask=smask[:, None], other=0.0,
                        cache_modifier=".cg")
        t_safe = tl.where(total > 0, total, 1.0)
        tl.store(OUT + row * D + d, (tl.sum(parts * w[:, None], 0) / t_safe).to(OUT.dtype.element_ty))
        if WRITE_LSE:  # flash-attn reports the LSE of a sequence with no keys as +inf
            tl.store(LSE + row, tl.where(total > 0, m_safe + tl.log(t_safe), float("inf")))


@triton.jit
def _combine_kernel(WS, OUT, LSE, n_s, D: tl.constexpr, S_PAD: tl.constexpr, WRITE_LSE: tl.constexpr):
    # MODE 1's second launch, grid (B, Hq): one program per query head
    row = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    ws_lse = WS + tl.num_programs(0) * tl.num_programs(1) * n_s * D
    _merge(WS, ws_lse, OUT, LSE, row, n_s, 1, S_PAD, D, WRITE_LSE)


_split = FastLaunch(_split_kernel, 9)
_combine = FastLaunch(_combine_kernel, 3)


@lru_cache(maxsize=8)
def _num_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def supports(head_dim: int, dtype: torch.dtype) -> bool:
    """Shapes this kernel handles: power-of-two head_dim 16..256, fp16/bf16 (tl.dot's operand types)."""
    return dtype in (torch.float16, torch.bfloat16) and 16 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0


def num_splits(batch: int, hk: int, max_len: int, num_sms: int) -> tuple[int, int]:
    """(splits, chunk): about four programs per SM, each a whole number of BLOCK_N tiles.

    From shapes only (max_len is the block table's capacity, never a sequence length), so a captured
    CUDA graph replays the same launch whatever the lengths are then.
    """
    tiles = max(1, -(-max_len // _BLOCK_N))
    splits = max(1, min(tiles, -(-4 * num_sms // (batch * hk))))
    chunk = -(-tiles // splits) * _BLOCK_N
    return max(1, -(-max_len // chunk)), chunk


# (device, stream) -> (counts, partials) for eager steps: int32 arrival counts, one per (sequence, kv
# head), each reset by the program that merges, so they stay zero between steps; and float32 room for
# the partial outputs and LSEs. Per stream: steps on one stream run one after the other, so they can
# share a buffer, while two streams decoding at once must not. Kept rather than allocated per step
# (an allocation is microseconds of host time on a host-bound step); never used inside a CUDA graph.
_workspaces: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _workspace(dev: torch.device, counts: int, floats: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The current stream's workspace, grown to size; None while a CUDA graph is being captured: a
    graph would hold the address of a buffer shared with eager steps (and one allocated during capture
    lives in the graph's pool). Graphs take MODE 1 with buffers of their own: host time is not what
    they pay."""
    if dev.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return None
        key = (dev.index, driver.active.get_current_stream(dev.index))
    else:  # the interpreter (TRITON_INTERPRET=1) runs on CPU tensors
        key = (str(dev), 0)
    ws = _workspaces.get(key)
    if ws is None or ws[0].numel() < counts or ws[1].numel() < floats:
        have = (0, 0) if ws is None else (ws[0].numel(), ws[1].numel())
        ws = _workspaces[key] = (torch.zeros(max(counts, have[0], 4096), dtype=torch.int32, device=dev),
                                 torch.empty(max(floats, have[1]), dtype=torch.float32, device=dev))
    return ws


class _Plan:
    """Everything about a launch that follows from shapes, strides and flags, worked out once per call
    shape (a decode step is host-bound; an engine repeats a few shapes for its whole life)."""

    __slots__ = ("batch", "hq", "hk", "splits", "chunk", "floats", "grid", "consts", "consts_graph", "combine")

    def __init__(self, qs, kshape, sk, sv, max_len: int, num_sms: int, want_lse: bool) -> None:
        batch, hq, d = qs[0], qs[-2], qs[-1]
        page, hk = kshape[1], kshape[2]
        group = hq // hk
        self.batch, self.hq, self.hk = batch, hq, hk
        self.splits, self.chunk = num_splits(batch, hk, max_len, num_sms)
        self.floats = batch * hq * self.splits * (d + 1)  # partial outputs (B, Hq, S, D), then LSEs (B, Hq, S)
        self.grid = (batch, hk, self.splits)
        s_pad = 1 << (self.splits - 1).bit_length()
        base = dict(PAGE=page, GROUP=group, G_PAD=max(16, 1 << (group - 1).bit_length()), D=d, BLOCK_N=_BLOCK_N,
                    SK0=sk[0], SK1=sk[1], SK2=sk[2], SV0=sv[0], SV1=sv[1], SV2=sv[2])
        self.consts = dict(base, MODE=0 if self.splits == 1 else 2, WRITE_LSE=want_lse, S_PAD=s_pad)
        self.consts_graph = dict(base, MODE=1, WRITE_LSE=want_lse, S_PAD=s_pad)
        self.combine = dict(D=d, S_PAD=s_pad, WRITE_LSE=want_lse)


_plans: dict[tuple, _Plan] = {}


def paged_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seqlens: torch.Tensor, scale: float, max_len: int, num_sms: int | None = None, want_lse: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """q (B, Hq, D) or (B, 1, Hq, D); caches (num_blocks, page, Hk, D); block_table and seqlens int32,
    contiguous (the callers convert them) -> out shaped like q, lse (B, Hq) float32 (None unless wanted).

    One launch: the splits merge themselves (MODE 2), or there is one split per (sequence, kv head)
    when that already fills the GPU (MODE 0); under CUDA-graph capture split + combine (MODE 1).
    This runs on every eager decode step, which is bound by host time: attributes are read once.
    """
    qs = q.shape
    key = (qs, k_cache.shape, k_cache.stride(), v_cache.stride(), max_len, num_sms, want_lse, q.get_device())
    plan = _plans.get(key)
    dev = q.device
    if plan is None:
        if len(_plans) > 4096:  # shapes an engine stopped using
            _plans.clear()
        sms = num_sms if num_sms is not None else (_num_sms(dev.index or 0) if dev.type == "cuda" else 1)
        plan = _plans[key] = _Plan(qs, k_cache.shape, key[2], key[3], max_len, sms, want_lse)
    if not q.is_contiguous():
        q = q.contiguous()
    out = torch.empty(qs, dtype=q.dtype, device=dev)
    lse = torch.empty(plan.batch, plan.hq, dtype=torch.float32, device=dev) if want_lse else None
    lse_arg = out if lse is None else lse  # a pointer the kernel never writes through when not wanted
    consts, ws, cnt = plan.consts, out, seqlens  # (unused pointers in MODE 0)
    if plan.splits > 1:
        shared = _workspace(dev, plan.batch * plan.hk, plan.floats)
        if shared is None:
            consts, ws = plan.consts_graph, torch.empty(plan.floats, dtype=torch.float32, device=dev)
        else:
            cnt, ws = shared
    _split(plan.grid, (q, k_cache, v_cache, block_table, seqlens, out, lse_arg, ws, cnt, float(scale), plan.chunk,
                       block_table.stride(0)), consts, num_warps=4, num_stages=2)
    if consts is plan.consts_graph:
        _combine((plan.batch, plan.hq, 1), (ws, out, lse_arg, plan.splits), plan.combine, num_warps=4)
    return out, lse
