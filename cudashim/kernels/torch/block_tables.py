"""Decode metadata: copy each request's block table into the fixed-shape buffer a graph replays."""

from __future__ import annotations

import functools
from typing import Callable

import torch

from .._launch import check_copy_block_tables

__all__ = ["copy_block_tables_tl"]


@functools.lru_cache(maxsize=None)
def copy_block_tables_tl(max_num_blocks: int, *, max_seqlen_q: int = 1, fill: int = -1) -> Callable[..., torch.Tensor]:
    """A kernel `(src, num_blocks, out) -> out` filling out in place.

    Static: `max_num_blocks` (out's width), `max_seqlen_q` (query tokens per request: each gets
    its own copy of the request's row, as speculative decoding needs), `fill` (the pad value).
    Dynamic: src `(B, >= max_num_blocks)` int32 block tables, num_blocks `(B,)` int32 blocks in
    use per request, out `(B * max_seqlen_q, max_num_blocks)` int32:
    out[b * max_seqlen_q + j, i] = src[b, i] if i < num_blocks[b] else fill.
    """
    check_copy_block_tables(max_num_blocks, max_seqlen_q)

    def copy(src: torch.Tensor, num_blocks: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        cols = torch.arange(max_num_blocks, device=src.device)
        rows = src[:, :max_num_blocks]
        used = cols < num_blocks.to(cols.dtype)[:, None]
        table = torch.where(used, rows, torch.full_like(rows, fill))
        out.view(-1, max_seqlen_q, max_num_blocks).copy_(table[:, None, :])
        return out

    return copy
