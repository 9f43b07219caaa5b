"""Paged-KV decode attention in Triton (split-KV "flash decoding"), reading the pages in place.

torch's flash kernel (2.11) cannot read pages: decode through it would first gather every page into a
dense buffer, tripling the memory traffic of a memory-bound step. This kernel reads pages where they
are, and on an H200 it is faster than the flash kernel on contiguous tensors at every decode shape
benchmarked (benchmarks/bench_attention_gpu.py, CUDA-graph column).

One program per (sequence, kv head, split): it loads the GROUP query heads that share the kv head
(GQA: K/V are read once for all of them), walks its share of the sequence BLOCK_N tokens at a time —
each token's page looked up in the block table — with an online softmax in float32, and writes a
partial output and LSE; a second small kernel merges the splits (one launch, whatever their number; none when one split per
(sequence, kv head) already fills the GPU). One query per sequence (decode):
with one query, flash-attn's bottom-right causal mask allows every cached key.

Imported only on CUDA when triton is installed; L3 by tests/device/test_npu_ops_gpu.py (H200), and
its arithmetic runs in CI-less form under TRITON_INTERPRET=1 (tests/npu_ops/test_paged_triton_interpreted.py).
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl

__all__ = ["paged_decode", "supports", "num_splits"]

_BLOCK_N = 64


@triton.jit
def _split_kernel(
    Q, K, V, BT, LENS, OUT_P, LSE_P,
    scale, chunk,
    stride_qb, stride_qh,
    stride_kn, stride_kp, stride_kh,
    stride_vn, stride_vp, stride_vh,
    stride_btb,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    PAGE: tl.constexpr, GROUP: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    DIRECT: tl.constexpr,
):
    b = tl.program_id(0)
    hk = tl.program_id(1)
    s = tl.program_id(2)
    seqlen = tl.load(LENS + b)
    start = s * chunk
    end = tl.minimum(start + chunk, seqlen)
    g = tl.arange(0, G_PAD)
    d = tl.arange(0, D)
    gmask = g < GROUP
    heads = hk * GROUP + g
    q = tl.load(Q + b * stride_qb + heads[:, None] * stride_qh + d[None, :], mask=gmask[:, None], other=0.0)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for t0 in range(start, end, BLOCK_N):
        t = t0 + tl.arange(0, BLOCK_N)
        tmask = t < end
        page = tl.load(BT + b * stride_btb + t // PAGE, mask=tmask, other=0).to(tl.int64)
        off = t % PAGE
        k = tl.load(K + page[:, None] * stride_kn + off[:, None] * stride_kp + hk * stride_kh + d[None, :],
                    mask=tmask[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * scale
        qk = tl.where(tmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + page[:, None] * stride_vn + off[:, None] * stride_vp + hk * stride_vh + d[None, :],
                    mask=tmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    nonempty = l_i > 0
    l_safe = tl.where(nonempty, l_i, 1.0)
    out = acc / l_safe[:, None]
    if DIRECT:  # one split: this is the final answer (saves the combine launch); OUT_P/LSE_P are the outputs
        lse = tl.where(nonempty, m_i + tl.log(l_safe), float("inf"))  # flash-attn: +inf for no keys
        tl.store(OUT_P + b * stride_ob + heads[:, None] * stride_oh + d[None, :],
                 out.to(OUT_P.dtype.element_ty), mask=gmask[:, None])
        tl.store(LSE_P + b * stride_lb + heads * stride_lh, lse, mask=gmask)
    else:
        lse = tl.where(nonempty, m_i + tl.log(l_safe), float("-inf"))
        tl.store(OUT_P + b * stride_ob + heads[:, None] * stride_oh + s * stride_os + d[None, :], out,
                 mask=gmask[:, None])
        tl.store(LSE_P + b * stride_lb + heads * stride_lh + s, lse, mask=gmask)


@triton.jit
def _combine_kernel(
    OUT_P, LSE_P, OUT, LSE, splits,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    stride_b, stride_h,
    stride_lse_b, stride_lse_h,
    D: tl.constexpr, S_PAD: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.arange(0, S_PAD)
    d = tl.arange(0, D)
    smask = s < splits
    lse_s = tl.load(LSE_P + b * stride_lb + h * stride_lh + s, mask=smask, other=float("-inf"))
    m = tl.max(lse_s, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp(lse_s - m_safe)  # empty splits (and padding) weigh 0
    total = tl.sum(w, 0)
    parts = tl.load(OUT_P + b * stride_ob + h * stride_oh + s[:, None] * stride_os + d[None, :],
                    mask=smask[:, None], other=0.0)
    t_safe = tl.where(total > 0, total, 1.0)
    out = tl.sum(parts * w[:, None], 0) / t_safe
    tl.store(OUT + b * stride_b + h * stride_h + d, out.to(OUT.dtype.element_ty))
    # flash-attn reports the LSE of a sequence with no keys as +inf
    tl.store(LSE + b * stride_lse_b + h * stride_lse_h, tl.where(total > 0, m_safe + tl.log(t_safe), float("inf")))


@lru_cache(maxsize=8)
def _num_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def supports(head_dim: int, dtype: torch.dtype) -> bool:
    """Shapes this kernel handles: power-of-two head_dim 16..256, fp16/bf16 (tl.dot's operand types)."""
    return dtype in (torch.float16, torch.bfloat16) and 16 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0


def _int32(t: torch.Tensor) -> torch.Tensor:
    # checked in Python first: on a slow host even a no-op .to() costs microseconds per decode step
    return t if t.dtype == torch.int32 and t.is_contiguous() else t.to(torch.int32).contiguous()


def num_splits(batch: int, hk: int, max_len: int, num_sms: int) -> tuple[int, int]:
    """(splits, chunk): about four programs per SM, each a whole number of BLOCK_N tiles.

    From shapes only (max_len is the block table's capacity, never a sequence length), so a captured
    CUDA graph replays the same launch whatever the lengths are then.
    """
    tiles = max(1, -(-max_len // _BLOCK_N))
    splits = max(1, min(tiles, -(-4 * num_sms // (batch * hk))))
    chunk = -(-tiles // splits) * _BLOCK_N
    return max(1, -(-max_len // chunk)), chunk


def paged_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seqlens: torch.Tensor, scale: float, max_len: int, num_sms: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q (B, Hq, D); caches (num_blocks, page, Hk, D); -> out (B, Hq, D), lse (B, Hq) float32.

    One launch when one split per (sequence, kv head) already fills the GPU, else split + combine.
    """
    batch, hq, d = q.shape
    page, hk = k_cache.shape[1], k_cache.shape[2]
    group = hq // hk
    if num_sms is None:
        num_sms = _num_sms(q.device.index if q.device.index is not None else 0) if q.device.type == "cuda" else 1
    splits, chunk = num_splits(batch, hk, max_len, num_sms)
    if not q.is_contiguous():
        q = q.contiguous()
    table, lens = _int32(block_table), _int32(seqlens)
    out = torch.empty(batch, hq, d, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, hq, dtype=torch.float32, device=q.device)
    direct = splits == 1
    if direct:
        out_p, lse_p = out.view(batch, hq, 1, d), lse.view(batch, hq, 1)
    else:
        out_p = torch.empty(batch, hq, splits, d, dtype=torch.float32, device=q.device)
        lse_p = torch.empty(batch, hq, splits, dtype=torch.float32, device=q.device)
    _split_kernel[(batch, hk, splits)](
        q, k_cache, v_cache, table, lens, out_p, lse_p,
        float(scale), chunk,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        table.stride(0),
        out_p.stride(0), out_p.stride(1), out_p.stride(2),
        lse_p.stride(0), lse_p.stride(1),
        PAGE=page, GROUP=group, G_PAD=max(16, triton.next_power_of_2(group)), D=d, BLOCK_N=_BLOCK_N,
        DIRECT=direct, num_warps=4, num_stages=2,
    )
    if direct:
        return out, lse
    _combine_kernel[(batch, hq)](
        out_p, lse_p, out, lse, splits,
        out_p.stride(0), out_p.stride(1), out_p.stride(2),
        lse_p.stride(0), lse_p.stride(1),
        out.stride(0), out.stride(1),
        lse.stride(0), lse.stride(1),
        D=d, S_PAD=triton.next_power_of_2(splits),
        num_warps=4,
    )
    return out, lse
