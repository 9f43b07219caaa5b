"""Kernels for the batched execution's tests, written here: each exercises one kind of operation.

They live in a module of their own because the interpreter reads a kernel's source from its file.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step):
        row_ptr = in_ptr + row_idx * in_stride
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = tl.load(row_ptr + cols, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row_idx * out_stride + cols, numerator / denominator, mask=mask)


@triton.jit
def layer_norm_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def early_exit_kernel(slot_ptr, src_ptr, dst_ptr, D: tl.constexpr):
    """A store that skips the rows whose slot is -1 (a loaded value decides the branch)."""
    idx = tl.program_id(0)
    slot = tl.load(slot_ptr + idx)
    if slot == -1:
        return
    offs = tl.arange(0, D)
    tl.store(dst_ptr + slot * D + offs, tl.load(src_ptr + idx * D + offs))


@triton.jit
def divergent_loop_kernel(out_ptr, BLOCK: tl.constexpr):
    """Instance i runs its loop i + 1 times: every instance has its own trip count."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, pid + 1):
        acc += (tl.arange(0, BLOCK) + i).to(tl.float32) * 0.5
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


@triton.jit
def atomic_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@triton.jit
def histogram_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, BINS: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    tl.store(out_ptr + pid * BINS + tl.arange(0, BINS), tl.histogram(x, BINS))


@triton.jit
def _pair_max(a, ia, b, ib):
    take = b > a
    return tl.where(take, b, a), tl.where(take, ib, ia)


@triton.jit
def reductions_kernel(x_ptr, out_ptr, idx_ptr, cum_ptr, M: tl.constexpr, N: tl.constexpr):
    """Row maxima by a custom combine function, arg-max, column sums and a cumulative sum."""
    pid = tl.program_id(0)
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + pid * M * N + rows[:, None] * N + cols[None, :])
    ids = tl.broadcast_to(cols[None, :], (M, N))
    best, where = tl.reduce((x, ids), 1, _pair_max)
    tl.store(out_ptr + pid * (M + N + 1) + rows, best)
    tl.store(idx_ptr + pid * (M + 1) + rows, where)
    tl.store(idx_ptr + pid * (M + 1) + M, tl.argmax(tl.reshape(x, [M * N]), axis=0))
    tl.store(out_ptr + pid * (M + N + 1) + M + cols, tl.sum(x, axis=0))
    tl.store(out_ptr + pid * (M + N + 1) + M + N, tl.sum(x))
    tl.store(cum_ptr + pid * M * N + rows[:, None] * N + cols[None, :], tl.cumsum(x, axis=1))


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + pid * M * N + rows[:, None] * N + cols[None, :])
    y = tl.trans(x) * 2.0 + x.T
    tl.store(out_ptr + pid * M * N + cols[:, None] * M + rows[None, :], y)


@triton.jit
def grid2d_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """A 2-D grid: axis 0 picks the row, axis 1 the column block; num_programs scales the value."""
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, x * tl.num_programs(1) + row, mask=mask)


@triton.jit
def bf16_kernel(x_ptr, y_ptr, stats_ptr, scale, BLOCK: tl.constexpr):
    """bf16 arithmetic and reductions (computed in fp32, rounded to nearest even) and a float scalar."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = x * x + x
    tl.store(y_ptr + offs, (y.to(tl.float32) * scale).to(tl.bfloat16))
    tl.store(stats_ptr + pid * 2, tl.max(x, axis=0))
    tl.store(stats_ptr + pid * 2 + 1, tl.sum(x, axis=0))
