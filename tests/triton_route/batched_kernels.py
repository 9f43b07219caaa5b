"""Kernels for the batched execution's tests, written here: each exercises one kind of operation.
(Library kernels, Liger-Kernel's, trinix's and fla-core's, are the corpus's: tests/triton_route/test_corpus.py.)

They live in a module of their own because the interpreter reads a kernel's source from its file.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """out = 2 x + y, one masked block per instance."""
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
             mask=mask)


@triton.jit
def row_stride_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    """Instances take rows pid, pid + num_programs, ...: some run one more iteration than others."""
    cols = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        tl.store(out_ptr + row * n_cols + cols, x - tl.max(x, axis=0), mask=cols < n_cols)


@triton.jit
def _relu(x):
    return tl.maximum(x, 0.0)


@triton.jit
def dot_loop_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Instance i: rows i*BM.. of an fp16 (.., K) @ (K, BN), accumulated in fp32 over K in BK steps, through
    a nested @triton.jit function, stored as fp16."""
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.arange(0, BN)
    k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + m[:, None] * K + (k0 + k)[None, :])
        b = tl.load(b_ptr + (k0 + k)[:, None] * BN + n[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + m[:, None] * BN + n[None, :], _relu(acc).to(tl.float16))


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
