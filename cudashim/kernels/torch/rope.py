"""Rotary position embedding on q and k in place: neox (halves) or interleaved (pairs), partial dim."""

from __future__ import annotations

import functools
from typing import Callable

import torch

from .._launch import check_dtype_of, check_rope

__all__ = ["rope_tl"]


@functools.lru_cache(maxsize=None)
def rope_tl(
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    *,
    rotary_dim: int | None = None,
    is_neox: bool = True,
    dtype: str = "bfloat16",
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A kernel `(positions, q, k, cos_sin_cache) -> (q, k)` rotating q and k in place.

    Static: head counts, `head_dim`, `rotary_dim` (default head_dim; the rest passes through),
    `is_neox` (rotate halves, else adjacent pairs), `dtype`. Dynamic: positions `(N,)` int,
    q `(N, num_q_heads * head_dim)` or `(N, num_q_heads, head_dim)`, k likewise,
    cos_sin_cache `(max_position, rotary_dim)` float32: cos in the first half, sin in the second.
    """
    rot = check_rope(num_q_heads, num_kv_heads, head_dim, rotary_dim, dtype)
    half = rot // 2
    want = getattr(torch, dtype)

    def _rotate(t: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor) -> None:
        v = t.view(t.shape[0], heads, head_dim)
        r = v[..., :rot].float()
        if is_neox:
            x1, x2 = r[..., :half], r[..., half:]
        else:
            x1, x2 = r[..., 0::2], r[..., 1::2]
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        out = torch.cat((o1, o2), -1) if is_neox else torch.stack((o1, o2), -1).flatten(-2)
        v[..., :rot] = out.to(want)

    def rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
        check_dtype_of("rope_tl", want, q=q, k=k)
        cs = cos_sin_cache.index_select(0, positions.long()).float()
        cos, sin = cs[:, None, :half], cs[:, None, half:]
        _rotate(q, num_q_heads, cos, sin)
        _rotate(k, num_kv_heads, cos, sin)
        return q, k

    return rope
