"""Rotary embedding as flash_attn_with_kvcache applies it to q and the new k.

rotary_cos/sin are (seqlen_ro, rotary_dim / 2); only the first rotary_dim channels rotate.
Interleaved (GPT-J) pairs channels (0,1), (2,3)...; otherwise (GPT-NeoX) pairs i and i + rotary_dim/2.
New key t of sequence b sits at position cache_seqlens[b] + t; queries likewise when the attention is
causal or local, else every query sits at cache_seqlens[b] (flash-attn's documented rule).
"""

from __future__ import annotations

import torch

__all__ = ["apply_rotary", "rotate"]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """x (B, S, H, D); cos/sin (B, S, rotary_dim/2) already indexed by position."""
    rd = cos.shape[-1] * 2
    xr, rest = x[..., :rd].float(), x[..., rd:]
    c = cos.unsqueeze(2).float()
    s = sin.unsqueeze(2).float()
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        o1, o2 = x1 * c - x2 * s, x1 * s + x2 * c
        rotated = torch.stack((o1, o2), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2 :]
        rotated = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((rotated.to(x.dtype), rest), dim=-1)


def apply_rotary(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cache_seqlens: torch.Tensor,
    interleaved: bool,
    *,
    q_positions_advance: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q (B, Sq, H, D) and k (B, S_new, Hk, D) at their positions in the sequence."""
    start = cache_seqlens.long().view(-1, 1)
    k_pos = start + torch.arange(k.shape[1], device=k.device).view(1, -1)
    if q_positions_advance:
        q_pos = start + torch.arange(q.shape[1], device=q.device).view(1, -1)
    else:
        q_pos = start.expand(-1, q.shape[1])
    cos, sin = cos.to(q.device), sin.to(q.device)
    return rotate(q, cos[q_pos], sin[q_pos], interleaved), rotate(k, cos[k_pos], sin[k_pos], interleaved)
