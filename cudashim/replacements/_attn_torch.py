"""Portable attention: one sequence at a time, any device, flash-attn's exact semantics.

What the `cpu` platform runs (over CPU views of the emulated device's tensors where it can, see
_core), and CUDA's fallback for what the flash kernel cannot do.
Low-precision inputs are computed in float32 and rounded once at the end, so the error against a
float64 reference is one output rounding. The plain case goes through SDPA (memory-efficient on CPU);
softcap, ALiBi, LSE, probabilities and dropout go through explicit math.

Masking follows flash-attn: query i of a sequence with sq queries and sk keys sits at key position
i + sk - sq (bottom-right alignment); causal allows keys j <= that position; a window (left, right)
allows [pos - left, pos + right]. A row with no allowed key outputs 0 and has LSE +inf.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ._attn import Attn
from ._varlen import blocks_needed

__all__ = ["attend", "allowed_mask"]


def allowed_mask(sq: int, sk: int, window: tuple[int, int], device: torch.device) -> Optional[torch.Tensor]:
    """(sq, sk) bool, True where query i may see key j; None when everything is allowed."""
    left, right = window
    # no lower bound, and even row 0 (key position sk - sq) reaches the last key: nothing is masked
    # (causal decode, one query at the end, is this case: skip building and testing a mask per step)
    if left < 0 and (right < 0 or right >= sq - 1):
        return None
    pos = torch.arange(sq, device=device).unsqueeze(1) + (sk - sq)
    j = torch.arange(sk, device=device).unsqueeze(0)
    ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if right >= 0:
        ok &= j <= pos + right
    if left >= 0:
        ok &= j >= pos - left
    return ok


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _one(
    a: Attn, qi: torch.Tensor, ki: torch.Tensor, vi: torch.Tensor, slopes: Optional[torch.Tensor]
) -> tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """qi (sq, Hq, D), ki/vi (sk, Hk, D) -> out (sq, Hq, Dv), lse (Hq, sq), probs (Hq, sq, sk)."""
    sq, hq, _ = qi.shape
    sk, hk, dv = vi.shape
    cdt = _compute_dtype(qi.dtype)
    if sk == 0:
        lse = torch.full((hq, sq), float("inf"), dtype=torch.float32, device=qi.device)
        probs = torch.zeros(hq, sq, 0, dtype=cdt, device=qi.device)
        return qi.new_zeros(sq, hq, dv), lse, probs
    # .to() only where the dtype changes: on the cpu platform every Tensor.to is a shim wrapper call
    q, k, v = (t.transpose(0, 1) if t.dtype == cdt else t.transpose(0, 1).to(cdt) for t in (qi, ki, vi))
    if hk != hq:  # GQA/MQA: q head h reads kv head h // (hq // hk)
        k = k.repeat_interleave(hq // hk, dim=0)
        v = v.repeat_interleave(hq // hk, dim=0)
    mask = allowed_mask(sq, sk, a.window, qi.device)
    row_ok = None if mask is None else mask.any(dim=-1)  # (sq,)
    if _plain(a):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=a.scale)
        if row_ok is not None and not bool(row_ok.all()):
            out = out.masked_fill(~row_ok.view(1, sq, 1), 0.0)
        out = out.transpose(0, 1)
        return (out if out.dtype == qi.dtype else out.to(qi.dtype)), None, None

    s = torch.matmul(q, k.transpose(-1, -2)) * a.scale  # (Hq, sq, sk)
    if a.softcap > 0:
        s = torch.tanh(s / a.softcap) * a.softcap
    if slopes is not None:
        pos = torch.arange(sq, device=qi.device).unsqueeze(1) + (sk - sq)
        dist = (pos - torch.arange(sk, device=qi.device).unsqueeze(0)).abs().to(cdt)
        s = s - slopes.to(cdt).view(hq, 1, 1) * dist
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf on empty rows
    p = torch.exp(s - lse.unsqueeze(-1))
    if row_ok is not None:
        p = p.masked_fill(~row_ok.view(1, sq, 1), 0.0)  # exp(-inf - -inf) is nan: empty rows are 0
        lse = lse.masked_fill(~row_ok.view(1, sq), float("inf"))  # flash-attn's LSE of an empty row
    pd = F.dropout(p, a.dropout_p, training=True) if a.dropout_p > 0 else p
    out = torch.matmul(pd, v)
    return out.transpose(0, 1).to(qi.dtype), lse.float(), p


def _plain(a: Attn) -> bool:
    """Nothing but masking: SDPA computes it (no softcap, ALiBi, LSE, probabilities or dropout)."""
    return not (a.softcap > 0 or a.alibi_slopes is not None or a.want_lse or a.want_probs or a.dropout_p > 0)


def _uniform(a: Attn, cu_q: list[int], lens_k: list[int], starts_k: list[int]) -> Optional[tuple[int, int]]:
    """(sq, sk) when every sequence has sq queries and sk keys packed back to back (a decode step, or a
    batch of equal prompts), else None."""
    b = a.batch
    if b < 2 or a.paged or not _plain(a) or cu_q[0] != 0:
        return None
    sq, sk = cu_q[1], lens_k[0]
    if sq == 0 or sk == 0 or cu_q != list(range(0, (b + 1) * sq, sq)) or lens_k != [sk] * b:
        return None
    return (sq, sk) if starts_k == list(range(0, b * sk, sk)) else None


def _batched(a: Attn, sq: int, sk: int) -> torch.Tensor:
    """Every sequence of the same length: one SDPA call over the batch, the same masking as _one.

    The same per-(sequence, head) products as the loop over sequences, in a few operators instead of
    a few per sequence (a decode step of a serve loop runs this once per layer)."""
    b, hq, hk = a.batch, a.q.shape[1], a.k.shape[1]
    cdt = _compute_dtype(a.q.dtype)

    def heads(t: torch.Tensor, n: int) -> torch.Tensor:  # (b*n, H, D) -> (b, H, n, D)
        t = t[: b * n].view(b, n, t.shape[1], t.shape[2]).transpose(1, 2)
        return t if t.dtype == cdt else t.to(cdt)

    q, k, v = heads(a.q, sq), heads(a.k, sk), heads(a.v, sk)
    if hk != hq:  # GQA/MQA: q head h reads kv head h // (hq // hk)
        k = k.repeat_interleave(hq // hk, dim=1)
        v = v.repeat_interleave(hq // hk, dim=1)
    mask = allowed_mask(sq, sk, a.window, a.q.device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=a.scale)
    if mask is not None:
        row_ok = mask.any(dim=-1)
        if not bool(row_ok.all()):
            out = out.masked_fill(~row_ok.view(1, 1, sq, 1), 0.0)
    out = out.transpose(1, 2).reshape(b * sq, hq, v.shape[-1])
    return out if out.dtype == a.q.dtype else out.to(a.q.dtype)


def attend(a: Attn) -> tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """Loop over sequences (host-side bookkeeping is free on CPU); one call when they are all alike."""
    cu_q = [int(x) for x in a.cu_q.tolist()]
    lens_k = [int(x) for x in a.key_lengths().tolist()]
    starts_k = [0] * len(lens_k) if a.cu_k is None else [int(x) for x in a.cu_k[:-1].tolist()]
    uniform = _uniform(a, cu_q, lens_k, starts_k)
    if uniform is not None:
        return _batched(a, *uniform), None, None
    hq = a.q.shape[1]
    dv = a.v.shape[-1]
    out = a.q.new_empty(a.q.shape[0], hq, dv)
    lse = torch.empty(hq, a.q.shape[0], dtype=torch.float32, device=a.q.device) if a.want_lse else None
    probs = None
    if a.want_probs:
        probs = torch.zeros(a.batch, hq, max(a.max_q, 1), max(a.max_k, 1), dtype=a.q.dtype, device=a.q.device)
    table = a.block_table.long() if a.paged else None
    for b in range(a.batch):
        q0, q1 = cu_q[b], cu_q[b + 1]
        n = lens_k[b]
        if table is not None:
            bs = a.k.shape[1]
            pages = table[b, : blocks_needed(n, bs)]
            ki = a.k.index_select(0, pages).flatten(0, 1)[:n]
            vi = a.v.index_select(0, pages).flatten(0, 1)[:n]
        else:
            ki = a.k[starts_k[b] : starts_k[b] + n]
            vi = a.v[starts_k[b] : starts_k[b] + n]
        slopes = None
        if a.alibi_slopes is not None:
            slopes = a.alibi_slopes if a.alibi_slopes.dim() == 1 else a.alibi_slopes[b]
        o, l, p = _one(a, a.q[q0:q1], ki, vi, slopes)
        out[q0:q1] = o
        if lse is not None and l is not None:
            lse[:, q0:q1] = l
        if probs is not None and p is not None:
            probs[b, :, : q1 - q0, : p.shape[-1]] = p.to(probs.dtype)
    return out, lse, probs
