"""bf16 for the interpreter: numpy has no bf16, Triton's interpreter keeps its bit patterns in uint16.
Arithmetic is done in fp32 and rounded back to nearest even, as the hardware's bf16 instructions do."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_bf16", "to_f32", "from_f32"]


def is_bf16(ty: Any) -> bool:
    import triton.language as tl

    return getattr(ty, "scalar", ty) == tl.bfloat16


def to_f32(bits: Any) -> Any:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def from_f32(values: Any) -> Any:
    """fp32 -> bf16 bit patterns, rounded to nearest even; a NaN stays a (quiet) NaN."""
    f = np.asarray(values, dtype=np.float32)
    if f.ndim == 0:  # the in-place steps below need an array, not a numpy scalar
        return from_f32(f.reshape(1)).reshape(())
    if f.size and f.flags.c_contiguous and f.flags.writeable:
        # torch's conversion rounds finite values and infinities to nearest even in one pass; its NaNs
        # lose their sign and payload, so a block holding one (max is NaN) takes the steps below
        if not np.isnan(f.max()):
            import torch

            return torch.from_numpy(f).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    bits = f.view(np.uint32)
    # bits + 0x7FFF + (bit 16 of bits), wrapping in uint32, with one temporary
    r = np.right_shift(bits, np.uint32(16))
    r &= np.uint32(1)
    r += np.uint32(0x7FFF)
    r += bits
    rounded = np.right_shift(r, np.uint32(16), out=r).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, ((bits >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16), rounded)
    return rounded
