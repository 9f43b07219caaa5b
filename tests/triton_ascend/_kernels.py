"""CUDA-written Triton kernels the Ascend checks take as subjects: a vector add, and what CUDA kernels reach
for that triton-ascend refuses (the patterns of the Triton tutorials, from pinned libraries, are
scripts/sim_tutorials.py's)."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def cast_fp64_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.cast(tl.load(x_ptr + offs, mask=m), tl.float64), mask=m)


@triton.jit
def to_fp64_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.float64), mask=m)


@triton.jit
def erfc_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, libdevice.erfc(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def rsqrt_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, libdevice.rsqrt(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def dot_kernel(a_ptr, c_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + o[:, None] * BLOCK + o[None, :])
    tl.store(c_ptr + o[:, None] * BLOCK + o[None, :], tl.dot(a, a))


@triton.jit
def wide_row_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # one program holds three fp32 rows of BLOCK elements at once
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    twice = x * 2
    tl.store(y_ptr + o, twice + x)
