"""Paged KV-cache write by slot mapping (slot -1 skipped), bf16/fp16 or FP8-e4m3 + UE8M0 scales."""

from __future__ import annotations

import functools
from typing import Callable

import torch

from ...platform.cpu_views import on_host
from .._launch import check_scale_cache, check_store_inputs, check_store_kv_cache
from ._ue8m0 import quantize_groups

__all__ = ["store_kv_cache_tl"]


def _write_rows(flat: torch.Tensor, rows: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """flat[slot] = row for every slot >= 0, in one scatter with no data-dependent shape, so a CUDA
    graph can capture it (a boolean-mask index would synchronize): skipped rows are pointed at the
    first kept row's slot with that row's own values, so duplicate indices all write the same bytes."""
    keep = slot_mapping >= 0
    slots = slot_mapping.long()
    first = keep.to(torch.int32).argmax().reshape(1)  # the first kept row (row 0 when none is kept)
    fslot = slots.index_select(0, first).clamp(min=0)
    frow = torch.where(keep.index_select(0, first)[:, None], rows.index_select(0, first), flat.index_select(0, fslot))
    # index_put_, not index_copy_: a device without an in-place index_copy kernel (the emulated one)
    # runs index_copy_ as a functional copy of the whole cache plus a copy back
    flat.index_put_((torch.where(keep, slots, fslot),), torch.where(keep[:, None], rows, frow))


@functools.lru_cache(maxsize=None)
def store_kv_cache_tl(
    row_elems: int, block_size: int, *, dtype: str = "bfloat16", fp8: bool = False, group_size: int = 32
) -> Callable[..., None]:
    """A kernel `(x, cache, slot_mapping, cache_sf=None) -> None` writing x's rows into the cache.

    Static: `row_elems` (elements per token, e.g. num_kv_heads * head_dim), `block_size`, `dtype`
    of x, `fp8` and its `group_size`. Dynamic: x `(N, ...)` with row_elems per token; cache
    `(num_blocks, block_size, ...)` (dtype of x, or float8_e4m3fn with fp8); `slot_mapping (N,)`
    int, slot = block * block_size + offset, -1 = skip; with fp8, `cache_sf (num_blocks,
    block_size, ...)` of any integer container holding row_elems // group_size UE8M0 bytes per
    slot, packed little-endian (4 per int32 on CUDA, 2 per int16 on Ascend).
    """
    check_store_kv_cache(row_elems, block_size, dtype, fp8, group_size)
    want = getattr(torch, dtype)

    def store(x: torch.Tensor, cache: torch.Tensor, slot_mapping: torch.Tensor, cache_sf: torch.Tensor | None = None) -> None:
        check_store_inputs(x, cache, want, block_size)
        rows = x.reshape(-1, row_elems)
        flat = cache.view(-1, row_elems)  # a view: fails loudly on a non-contiguous cache
        if not fp8:
            # on a device whose memory is the host's: the CPU's operators on views of the same memory
            _write_rows(*(on_host(flat, rows, slot_mapping) or (flat, rows, slot_mapping)))
            return
        keep = slot_mapping >= 0
        # index_copy_ with a filtered index keeps this one vectorised scatter, no loop over tokens
        slots = slot_mapping[keep].long()
        check_scale_cache(cache_sf)
        q, sf = quantize_groups(rows[keep], group_size)
        flat.view(torch.uint8).index_copy_(0, slots, q.view(torch.uint8))
        sf_flat = cache_sf.view(torch.uint8).view(-1, row_elems // group_size)
        sf_flat.index_copy_(0, slots, sf)

    return store
