"""Varlen bookkeeping shared by every attention path: cu_seqlens <-> lengths, paged-KV gathers.

flash-attn describes a batch of ragged sequences packed along one token axis by `cu_seqlens`
(B+1 cumulative offsets, starting at 0). Paged KV caches (vLLM / nano-vllm layout) hold
`(num_blocks, block_size, heads, dim)` pages and a `block_table` (B, max_blocks) of page ids per
sequence; rows are padded with anything (nano-vllm pads with -1) past the pages in use.
Everything here is pure torch and works on any device without a Python loop per sequence.
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = [
    "lengths_from_cu",
    "cu_from_lengths",
    "blocks_needed",
    "paged_slots",
    "gather_paged_padded",
    "gather_paged_packed",
    "gather_packed_prefixes",
]


def lengths_from_cu(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """(B+1,) cumulative offsets -> (B,) lengths, same dtype and device."""
    return cu_seqlens[1:] - cu_seqlens[:-1]


def cu_from_lengths(lengths: torch.Tensor | Sequence[int], *, device: torch.device | str | None = None) -> torch.Tensor:
    """(B,) lengths -> (B+1,) int32 cumulative offsets starting at 0 (flash-attn's convention)."""
    lens = torch.as_tensor(lengths, device=device)
    cu = torch.zeros(lens.numel() + 1, dtype=torch.int32, device=lens.device)
    torch.cumsum(lens.reshape(-1), dim=0, out=cu[1:])
    return cu


def blocks_needed(length: int, block_size: int) -> int:
    """Pages a sequence of `length` tokens occupies."""
    return -(-int(length) // int(block_size))


def paged_slots(block_table: torch.Tensor, positions: torch.Tensor, batch_index: torch.Tensor, block_size: int) -> torch.Tensor:
    """Flat slot (page * block_size + offset) of token `positions[i]` of sequence `batch_index[i]`.

    This is the address where nano-vllm's store_kvcache writes, and where a token is read back from.
    """
    pos = positions.long()
    pages = block_table.long()[batch_index.long(), pos // block_size]
    return pages * block_size + pos % block_size


def gather_paged_padded(cache: torch.Tensor, block_table: torch.Tensor, num_blocks: int) -> torch.Tensor:
    """Copy the first `num_blocks` pages of every sequence into a dense (B, num_blocks*block_size, H, D).

    One index_select, no sync: entries past a sequence's pages (padding, -1) are clamped to page 0;
    the caller masks those tokens out with the per-sequence lengths (flash's seqused_k).
    """
    batch = block_table.shape[0]
    bs = cache.shape[1]
    ids = block_table[:, :num_blocks].clamp_min(0).reshape(-1).long()
    pages = cache.index_select(0, ids)
    return pages.view(batch, num_blocks * bs, *cache.shape[2:])


def gather_paged_packed(cache: torch.Tensor, block_table: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """Gather exactly `lengths[b]` tokens of each sequence, packed (sum(lengths), H, D) in batch order.

    Needs the lengths on the host (one sync on an accelerator); used by paths that take packed TND input.
    """
    bs = cache.shape[1]
    flat = cache.reshape(-1, *cache.shape[2:])
    device = block_table.device
    lens = torch.as_tensor([int(n) for n in lengths], dtype=torch.long, device=device)
    total = int(sum(int(n) for n in lengths))
    batch_index = torch.repeat_interleave(torch.arange(lens.numel(), device=device), lens)
    starts = torch.cumsum(lens, 0) - lens
    positions = torch.arange(total, device=device) - starts[batch_index]
    slots = paged_slots(block_table, positions, batch_index, bs)
    return flat.index_select(0, slots.to(flat.device))


def gather_packed_prefixes(packed: torch.Tensor, cu_seqlens: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """The first `lengths[b]` tokens of each packed segment starting at cu_seqlens[b], packed anew in batch order.

    flash-attn's seqused_k over packed keys; needs the lengths on the host (like gather_paged_packed).
    """
    device = packed.device
    lens = torch.as_tensor([int(n) for n in lengths], dtype=torch.long, device=device)
    total = int(sum(int(n) for n in lengths))
    batch_index = torch.repeat_interleave(torch.arange(lens.numel(), device=device), lens)
    offsets = torch.arange(total, device=device) - (torch.cumsum(lens, 0) - lens)[batch_index]
    return packed.index_select(0, cu_seqlens.to(device).long()[:-1][batch_index] + offsets)
