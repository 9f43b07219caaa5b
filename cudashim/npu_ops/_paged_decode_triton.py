"""Paged-KV decode attention in Triton (split-KV "flash decoding"), for pages the flash kernel can't read.

PyTorch's flash kernel reads a paged cache only when torch exposes `block_table` and pages hold a
multiple of 256 tokens; otherwise decode would have to gather every page into a dense buffer first,
which triples the memory traffic of a memory-bound step. This kernel reads the pages in place.

One program per (sequence, kv head, split): it loads the GROUP query heads that share the kv head
(GQA: K/V are read once for all of them), walks its share of the sequence BLOCK_N tokens at a time —
each token's page looked up in the block table — with an online softmax in float32, and writes a
partial output and LSE; a second small kernel merges the splits (one launch, whatever their number). One query per sequence (decode):
with one query, flash-attn's bottom-right causal mask allows every cached key.

Imported only on CUDA when triton is installed; L3 by tests/device/test_npu_ops_gpu.py (H200), and
its arithmetic runs in CI-less form under TRITON_INTERPRET=1 (tests/npu_ops/test_paged_decode_triton.py).
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl

__all__ = ["paged_decode", "supports"]

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


def paged_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seqlens: torch.Tensor, scale: float, max_len: int, num_sms: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q (B, Hq, D); caches (num_blocks, page, Hk, D); -> out (B, Hq, D), lse (B, Hq) float32."""
    batch, hq, d = q.shape
    page, hk = k_cache.shape[1], k_cache.shape[2]
    group = hq // hk
    if num_sms is None:
        num_sms = _num_sms(q.device.index if q.device.index is not None else 0) if q.is_cuda else 1
    tiles = max(1, -(-max_len // _BLOCK_N))
    splits = max(1, min(tiles, -(-4 * num_sms // (batch * hk))))  # about four programs per SM
    chunk = -(-tiles // splits) * _BLOCK_N
    splits = max(1, -(-max_len // chunk))
    q = q.contiguous()
    table = block_table.to(torch.int32).contiguous()
    lens = seqlens.to(torch.int32).contiguous()
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
        num_warps=4, num_stages=2,
    )
    out = torch.empty(batch, hq, d, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, hq, dtype=torch.float32, device=q.device)
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
