"""Per-token-group cast to FP8-e4m3 with power-of-two (UE8M0) scales, packed per the platform."""

from __future__ import annotations

import functools
from typing import Callable

import torch

from .._launch import check_cast_input, check_per_token_cast
from ._ue8m0 import quantize_groups

__all__ = ["per_token_cast_tl"]


@functools.lru_cache(maxsize=None)
def per_token_cast_tl(
    hidden: int, *, group_size: int = 128, dtype: str = "bfloat16", sf_dtype: str | None = None
) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A kernel `(x) -> (q, sf)`: x `(M, hidden)` -> q float8_e4m3fn `(M, hidden)` and UE8M0 scales.

    Static: `hidden`, `group_size` (32/64/128), `dtype` of x, `sf_dtype` the scale container
    (None: the platform's fp8_sf_type; int32 packs 4 scales, int16 packs 2, uint8 one). sf is
    `(M, hidden // group_size // pack)`; byte j of a row (little-endian) is group j's exponent + 127,
    and q * 2**(byte - 127) is the dequantised value.
    """
    sf_name = check_per_token_cast(hidden, group_size, dtype, sf_dtype)
    want = getattr(torch, dtype)
    sf_t = getattr(torch, sf_name)

    def cast(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_cast_input(x, want, hidden)
        q, sf = quantize_groups(x, group_size)
        return q, sf.contiguous().view(sf_t)

    return cast
