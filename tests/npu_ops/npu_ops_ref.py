"""The float64 oracle and data builders the npu_ops tests share.

The oracle is written from flash-attn's docstrings, not from the code under test: per sequence,
S = scale * Q K^T (einsum over explicitly indexed KV heads), optional softcap tanh, ALiBi bias
-slope * |i + sk - sq - j|, mask: query i sees key j iff j <= i + sk - sq (causal, bottom-right) and
within [i + sk - sq - left, i + sk - sq + right] (window); empty rows give 0 and LSE +inf.
Paged caches are built by scattering each sequence's own K/V into randomly chosen pages, so the
oracle reads the unpaged originals and never the gather code being tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def ref_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    causal: bool = False,
    window: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q (sq, Hq, D), k/v (sk, Hk, D) -> out (sq, Hq, Dv) float64, lse (Hq, sq) float64."""
    q, k, v = q.double(), k.double(), v.double()
    sq, hq, _ = q.shape
    sk, hk, _ = k.shape
    head_of = torch.arange(hq) // (hq // hk)  # q head h reads kv head h // group
    kx, vx = k[:, head_of], v[:, head_of]
    s = torch.einsum("qhd,khd->hqk", q, kx) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq).view(-1, 1) + (sk - sq)
    j = torch.arange(sk).view(1, -1)
    if alibi is not None:
        s = s - alibi.double().view(hq, 1, 1) * (i - j).abs().double()
    allowed = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if window[0] >= 0:
        allowed &= j >= i - window[0]
    if window[1] >= 0:
        allowed &= j <= i + window[1]
    s = s.masked_fill(~allowed, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    out = torch.einsum("hqk,khd->qhd", p, vx)
    empty = ~allowed.any(dim=-1)
    lse = lse.masked_fill(empty.view(1, sq), math.inf)
    return out, lse


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Tolerance against the oracle, computed from the same rounded inputs.

    The portable path computes in float32 and rounds the output once to `dtype`: the error is at
    most half an ulp of the output (rtol eps/2, we allow eps) plus float32 accumulation over at most
    a few hundred keys and 256 channels (well under 1e-5 absolute for O(1) values).
    """
    if dtype == torch.float32:
        return {"rtol": 1e-5, "atol": 1e-5}
    return {"rtol": torch.finfo(dtype).eps, "atol": 1e-5}


@dataclass
class Paged:
    k_cache: torch.Tensor      # (num_blocks, block_size, Hk, D)
    v_cache: torch.Tensor
    block_table: torch.Tensor  # (B, max_blocks) int32, padded with -1 as nano-vllm does


def make_paged(ks: list[torch.Tensor], vs: list[torch.Tensor], block_size: int, gen: torch.Generator,
               spare_blocks: int = 3, capacity: list[int] | None = None) -> Paged:
    """Scatter each sequence's (len, Hk, D) keys/values into randomly permuted pages.

    capacity[b] (>= len) reserves room for tokens to be appended later (decode tests).
    """
    cap = capacity or [t.shape[0] for t in ks]
    need = [max(1, -(-c // block_size)) for c in cap]
    total = sum(need) + spare_blocks
    hk, d = ks[0].shape[1:]
    dv = vs[0].shape[-1]
    k_cache = torch.randn(total, block_size, hk, d, generator=gen).to(ks[0].dtype)  # garbage elsewhere
    v_cache = torch.randn(total, block_size, hk, dv, generator=gen).to(vs[0].dtype)
    perm = torch.randperm(total, generator=gen)
    table = torch.full((len(ks), max(need)), -1, dtype=torch.int32)
    used = 0
    for b, (kb, vb) in enumerate(zip(ks, vs)):
        pages = perm[used : used + need[b]]
        used += need[b]
        table[b, : need[b]] = pages.to(torch.int32)
        for t in range(kb.shape[0]):
            k_cache[pages[t // block_size], t % block_size] = kb[t]
            v_cache[pages[t // block_size], t % block_size] = vb[t]
    return Paged(k_cache, v_cache, table)


def cu(lengths: list[int]) -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)


def randn(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(dtype)
