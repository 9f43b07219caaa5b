"""Paged-KV varlen prefill attention in Triton (flash-attention forward reading the pages in place).

Prefix-cached prefill (nano-vllm's `flash_attn_varlen_func(..., block_table=...)`) attends new queries
to a context that lives in a paged cache. torch's flash kernel (2.11) cannot read pages, and copying
the pages into a dense buffer first costs a full extra pass over the context. This kernel looks each key tile's page up
in the block table and reads it where it is.

One program per (BLOCK_M queries, query head, sequence). flash-attn's semantics: query i of a sequence
with sq queries and sk keys sits at key position i + sk - sq (bottom-right causal); GQA reads kv head
h // (Hq / Hk); online softmax in float32 with exp2; P rounded to the input dtype for the PV product
(as flash-attn does); a row with no key gets output 0 and LSE +inf. Keys are walked in two loops: the
tiles every row of the block may see (no mask), then the diagonal/tail tiles (masked).

Imported only on CUDA when triton is installed; L3 by tests/gpu/test_replacements_gpu.py (an NVIDIA GPU), its
arithmetic under TRITON_INTERPRET=1 by tests/replacements/test_paged_triton_interpreted.py where it can run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from .._state import on_reset
from ._triton_launch import FastLaunch

__all__ = ["paged_prefill", "supports"]

_LOG2E = 1.4426950408889634


@triton.jit
def _tile_rows(BT_ROW, start, n, n_ok, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """(page id, offset in the page) of each key n of the tile starting at `start`."""
    if PAGE % BLOCK_N == 0:  # the tile lies in one page: one table read, contiguous rows
        page = tl.load(BT_ROW + start // PAGE).to(tl.int64)
        return page + tl.zeros([BLOCK_N], tl.int64), n % PAGE
    else:
        page = tl.load(BT_ROW + n // PAGE, mask=n_ok, other=0).to(tl.int64)
        return page, n % PAGE


@triton.jit
def _prefill_kernel(
    Q, K, V, O, LSE, CU_Q, LENS, BT,
    qk_scale,
    stride_qt, stride_qh,
    stride_kn, stride_kp, stride_kh,
    stride_vn, stride_vp, stride_vh,
    stride_ot, stride_oh,
    stride_btb, stride_lh,
    GROUP: tl.constexpr, PAGE: tl.constexpr, D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, KEYS_CU: tl.constexpr,
):
    mt = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    q_start = tl.load(CU_Q + b)
    sq = tl.load(CU_Q + b + 1) - q_start
    if mt * BLOCK_M < sq:
        if KEYS_CU:  # LENS is cu_seqlens_k (B+1): one subtraction here instead of a launch on the host
            sk = tl.load(LENS + b + 1) - tl.load(LENS + b)
        else:
            sk = tl.load(LENS + b)
        hk = h // GROUP
        offs_m = mt * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, D)
        m_ok = offs_m < sq
        rows = (q_start + offs_m).to(tl.int64)
        q = tl.load(Q + rows[:, None] * stride_qt + h * stride_qh + offs_d[None, :], mask=m_ok[:, None], other=0.0)
        diag = sk - sq  # query i sits at key position i + diag
        if CAUSAL:
            hi = tl.minimum(sk, (mt + 1) * BLOCK_M + diag)  # keys past this are hidden from every row
            full = tl.minimum(hi, mt * BLOCK_M + diag + 1)  # keys before this are visible to every row
        else:
            hi = sk
            full = sk
        full = tl.maximum(full, 0) // BLOCK_N * BLOCK_N
        bt_row = BT + b.to(tl.int64) * stride_btb
        k_head = K + hk * stride_kh
        v_head = V + hk * stride_vh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        for start in range(0, full, BLOCK_N):  # no mask needed
            n = start + tl.arange(0, BLOCK_N)
            page, off = _tile_rows(bt_row, start, n, n < sk, PAGE, BLOCK_N)
            k = tl.load(k_head + page[:, None] * stride_kn + off[:, None] * stride_kp + offs_d[None, :])
            s = tl.dot(q, tl.trans(k)) * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.math.exp2(m_i - m_new)
            p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_head + page[:, None] * stride_vn + off[:, None] * stride_vp + offs_d[None, :])
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        for start in range(full, hi, BLOCK_N):  # the diagonal and the tail: masked
            n = start + tl.arange(0, BLOCK_N)
            n_ok = n < sk
            page, off = _tile_rows(bt_row, start, n, n_ok, PAGE, BLOCK_N)
            k = tl.load(k_head + page[:, None] * stride_kn + off[:, None] * stride_kp + offs_d[None, :],
                        mask=n_ok[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * qk_scale
            ok = n_ok[None, :]
            if CAUSAL:
                ok = ok & (n[None, :] <= offs_m[:, None] + diag)
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet stays empty
            alpha = tl.math.exp2(m_i - m_safe)
            p = tl.math.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_head + page[:, None] * stride_vn + off[:, None] * stride_vp + offs_d[None, :],
                        mask=n_ok[:, None], other=0.0)  # never multiply garbage (maybe NaN) by p = 0
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        nonempty = l_i > 0
        l_safe = tl.where(nonempty, l_i, 1.0)
        out = acc / l_safe[:, None]
        tl.store(O + rows[:, None] * stride_ot + h * stride_oh + offs_d[None, :], out.to(O.dtype.element_ty),
                 mask=m_ok[:, None])
        lse = tl.where(nonempty, (m_i + tl.math.log2(l_safe)) * 0.6931471805599453, float("inf"))
        tl.store(LSE + h * stride_lh + rows, lse, mask=m_ok)


_prefill = FastLaunch(_prefill_kernel, 8)


def supports(head_dim: int, dtype: torch.dtype) -> bool:
    """Power-of-two head_dim 16..256 and fp16/bf16 (tl.dot's operand types)."""
    return dtype in (torch.float16, torch.bfloat16) and 16 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0


# (BLOCK_M, BLOCK_N, num_warps, num_stages), chosen with benchmarks/bench_attention_gpu.py on Hopper:
# long query runs want 128x128 tiles, short ones (a few hundred new tokens per sequence) 64x64. The
# next entries are fallbacks for GPUs with less shared memory than Hopper (the first entry of each
# list needs about 220 KiB at d=128).
_LONG_Q = 512
_CONFIGS = {
    "long": [(128, 128, 8, 3), (128, 64, 8, 2), (64, 64, 4, 2), (32, 32, 4, 1)],
    "short": [(64, 64, 4, 3), (64, 64, 4, 2), (32, 32, 4, 1)],
    "d256": [(64, 32, 4, 2), (32, 32, 4, 1), (16, 16, 4, 1)],
}
_working: dict[tuple, tuple[int, int, int, int]] = {}  # (device, kind, d, page) -> the config that compiled


@on_reset
def _forget_configs() -> None:
    _working.clear()


def _configs(max_q: int, d: int) -> tuple[str, list[tuple[int, int, int, int]]]:
    kind = "d256" if d > 128 else ("long" if max_q >= _LONG_Q else "short")
    return kind, _CONFIGS[kind]


def paged_prefill(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    cu_q: torch.Tensor, seqlens_k: torch.Tensor, max_q: int, scale: float, causal: bool,
    config: tuple[int, int, int, int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q (total_q, Hq, D) packed by cu_q (int32); caches (num_blocks, page, Hk, D) with unit last stride;
    seqlens_k (B,) int32 keys per sequence, or (B+1,) int32 cumulative (flash-attn's cu_seqlens_k, whose
    differences are the cache lengths with a block table); -> out like q, lse (Hq, total_q) float32.

    max_q (a host int: the grid) bounds the queries per sequence. Sizes come from shapes and host ints
    only: no host sync, CUDA-graph capturable.
    """
    total, hq, d = q.shape
    page = k_cache.shape[1]
    if q.stride(-1) != 1:
        q = q.contiguous()
    out = torch.empty(total, hq, d, dtype=q.dtype, device=q.device)
    lse = torch.empty(hq, total, dtype=torch.float32, device=q.device)
    if config is not None:
        _launch(config, q, k_cache, v_cache, out, lse, cu_q, seqlens_k, block_table, max_q, scale, causal)
        return out, lse
    kind, configs = _configs(int(max_q), d)
    key = (q.device.index, kind, d, page)
    if key in _working:
        _launch(_working[key], q, k_cache, v_cache, out, lse, cu_q, seqlens_k, block_table, max_q, scale, causal)
        return out, lse
    for i, cfg in enumerate(configs):
        try:
            _launch(cfg, q, k_cache, v_cache, out, lse, cu_q, seqlens_k, block_table, max_q, scale, causal)
        except OutOfResources:  # smaller GPU: smaller tiles (a compile-time check)
            if i == len(configs) - 1:
                raise
            continue
        _working[key] = cfg
        return out, lse
    raise AssertionError("unreachable")


def _launch(cfg, q, k_cache, v_cache, out, lse, cu_q, seqlens_k, block_table, max_q, scale, causal) -> None:
    bm, bn, warps, stages = cfg
    hq, d = q.shape[1], q.shape[2]
    page, hk = k_cache.shape[1], k_cache.shape[2]
    sq, sk, sv, so = q.stride(), k_cache.stride(), v_cache.stride(), out.stride()
    _prefill(
        (max(1, -(-int(max_q) // bm)), hq, cu_q.numel() - 1),
        (q, k_cache, v_cache, out, lse, cu_q, seqlens_k, block_table, float(scale) * _LOG2E,
         sq[0], sq[1], sk[0], sk[1], sk[2], sv[0], sv[1], sv[2], so[0], so[1], block_table.stride(0), lse.stride(0)),
        dict(GROUP=hq // hk, PAGE=page, D=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=bool(causal),
             KEYS_CU=seqlens_k.numel() == cu_q.numel()),
        num_warps=warps, num_stages=stages,
    )
