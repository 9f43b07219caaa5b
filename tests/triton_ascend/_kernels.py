"""CUDA-written Triton kernels the Ascend checks take as subjects, written here for the tests.

The first five follow the algorithms of Triton's tutorials (vector add, fused row softmax, layer norm
forward, layer norm backward whose partial weight gradients are summed under an atomic spin lock, a blocked
fp16 matmul with a nested @jit activation); the tutorials' files are not installable, so these are our own
code in their style. The last ones use what CUDA kernels reach for and triton-ascend refuses.
"""

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
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.)
    rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    w = tl.load(W + cols, mask=mask)
    b = tl.load(B + cols, mask=mask)
    tl.store(Y + row * stride + cols, xc * rstd * w + b, mask=mask)


@triton.jit
def layer_norm_bwd_dx(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N, GROUP: tl.constexpr,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    xhat = tl.where(mask, (x - tl.load(Mean + row)) * tl.load(Rstd + row), 0.)
    wdy = tl.where(mask, w * dy, 0.)
    dx = (wdy - (xhat * tl.sum(xhat * wdy, axis=0) / N + tl.sum(wdy, axis=0) / N)) * tl.load(Rstd + row)
    tl.store(DX + row * stride + cols, dx, mask=mask)
    # partial dw/db of this row go to one of GROUP buffers, summed under that buffer's spin lock
    lock_id = row % GROUP
    Lock += lock_id
    Count = Lock + GROUP
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    pdw = dy * xhat
    pdb = dy
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        pdw += tl.load(DW, mask=mask)
        pdb += tl.load(DB, mask=mask)
    tl.store(DW, pdw, mask=mask)
    tl.store(DB, pdb, mask=mask)
    tl.atomic_xchg(Lock, 0)


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // num_n, pid % num_n
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    c = acc.to(tl.float16)
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, c, mask=(cm[:, None] < M) & (cn[None, :] < N))


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
