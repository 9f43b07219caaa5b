"""Power-of-two (UE8M0) scale arithmetic in torch, bit-exact with the TileLang kernels.

The exponent e = ceil(log2(amax / 448)) is read off the float32 bits of amax with integer ops
only: amax = 1.m * 2**E and 448 = 1.75 * 2**8, so e = E - 8 + (1.m > 1.75). No division, log or
fast-math rsqrt is involved, so every backend computes the very same bytes; the inverse scale
2**-e is built from bits too.
"""

from __future__ import annotations

import torch

from .._common import AMAX_FLOOR, FP8_MAX, MANT_1_75

__all__ = ["quantize_groups"]


def quantize_groups(x: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., n) -> (fp8 e4m3 values (..., n), UE8M0 bytes (..., n // group_size) as uint8)."""
    g = x.float().unflatten(-1, (-1, group_size))
    amax = g.abs().amax(-1).clamp_min(AMAX_FLOOR)
    bits = amax.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - (127 + 8) + ((bits & 0x7FFFFF) > MANT_1_75).to(torch.int32)
    inv = ((127 - e) << 23).view(torch.float32)
    q = (g * inv.unsqueeze(-1)).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.flatten(-2), (e + 127).to(torch.uint8)
