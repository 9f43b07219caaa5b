"""fp32 -> bf16 bit patterns of the Triton route (its interpreter and the batched execution share them):
rounded to nearest even, infinities kept, a NaN keeping its sign and upper payload (quieted), whatever
the layout of the block (contiguous, strided, read-only broadcast, 0-d, empty)."""

from __future__ import annotations

import numpy as np

from cudashim.triton_route._bf16 import from_f32


def _expected(f: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF  # to nearest, ties to even
    quiet = (bits >> 16) | 0x40
    return np.where(np.isnan(f), quiet, rounded).astype(np.uint16)


def test_every_class_of_value_rounds_to_nearest_even() -> None:
    bits = np.arange(0, 2**32, 65537 * 3 + 2, dtype=np.uint64).astype(np.uint32)
    ties = np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x7F7F8000, 0x00008000, 0x80018000, 0x7F800000, 0xFF800000],
                    dtype=np.uint32)  # ties both ways, overflow to inf, subnormals, infinities
    f = np.concatenate([bits, ties]).view(np.float32)
    finite = f[~np.isnan(f)].copy()
    assert np.array_equal(from_f32(finite), _expected(finite))
    assert np.array_equal(from_f32(f), _expected(f))  # NaNs among them: sign and payload kept


def test_layouts_give_the_same_bits() -> None:
    f = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32) * 1e3
    want = _expected(f)
    assert np.array_equal(from_f32(f), want)
    assert np.array_equal(from_f32(f[:, ::3]), want[:, ::3])  # strided
    row = np.broadcast_to(f[:1], (5, 48))  # read-only, stride 0
    assert np.array_equal(from_f32(row), np.broadcast_to(want[:1], (5, 48)))
    assert from_f32(np.float32(1.00390625)).shape == () and from_f32(np.float32(1.00390625)) == 0x3F80
    assert from_f32(np.zeros((0, 3), np.float32)).shape == (0, 3)
    nan = np.array([1.5, -np.nan, 2.0], np.float32)
    nan.view(np.uint32)[1] = 0xFFA12345  # a signalling NaN with a payload: quieted, sign and payload kept
    assert from_f32(nan).tolist() == [0x3FC0, 0xFFE1, 0x4000]
