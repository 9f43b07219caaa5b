"""Index arithmetic kept as formulas in the batched execution: the same bits as the exact interpreter.

Offsets and pointers of the form base + stride * index are not formed as address arrays: a load or
store through them reads or writes a strided view of the storage (evenly spaced instances) or indexes
it (scattered rows), and a mask that is the same in every lane is a constant. Each kernel here runs
through the route's exact interpreter and through the batched executor on equal inputs, and the
outputs must be equal bit for bit; the counters say the formula path served the launch, where it can,
and the edges it must leave to the address path (lanes outside the storage, lanes that write one
element twice, values that wrap) still give the interpreter's result.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from cudashim.triton_route import batched, interpreter


@triton.jit
def reverse_rows_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-7.0)
    # written backwards: a negative stride along the block
    tl.store(out_ptr + row * stride + (n_cols - 1 - cols), x * 2.0, mask=mask)


@triton.jit
def tail_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=1.5) + 1.0, mask=mask)


@triton.jit
def same_target_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    # every instance writes the same elements: the last instance's values stay, as in program order
    tl.store(out_ptr + cols, tl.load(x_ptr + row * BLOCK + cols))


@triton.jit
def scatter_rows_kernel(idx_ptr, x_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    dst = tl.load(idx_ptr + pid)
    cols = tl.arange(0, D)
    tl.store(out_ptr + dst * D + cols, tl.load(x_ptr + pid * D + cols))


@triton.jit
def tile_2d_kernel(x_ptr, out_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None].to(tl.int64) * stride_m + rn[None, :] * stride_n, mask=mask, other=0.0)
    # the transpose, written through swapped strides
    tl.store(out_ptr + rn[None, :] * M + rm[:, None], x, mask=mask)


@triton.jit
def where_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * BLOCK + cols)
    tl.store(out_ptr + row * BLOCK + cols, tl.where(cols < n, x - 1.0, 0.5))


@triton.jit
def wrap_rows_kernel(x_ptr, out_ptr, M, N: tl.constexpr, BM: tl.constexpr):
    # the tutorials' matmul rows: a block's rows wrapped into the matrix with `% M`
    rows = (tl.program_id(0) * BM + tl.arange(0, BM)) % M
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    tl.store(out_ptr + (tl.program_id(0) * BM + tl.arange(0, BM))[:, None] * N + cols[None, :], x + 1.0)


@triton.jit
def row_box_kernel(x_ptr, out_ptr, loaded_ptr, n_cols, hole, BLOCK: tl.constexpr):
    # rows of n_cols < BLOCK, one after another (a softmax's rows): lanes past a row reach the next row,
    # and past the storage for the last one; `hole` >= 0 takes one more lane out of the mask
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = (cols < n_cols) & (cols != hole)
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-3.0)
    tl.store(out_ptr + row * n_cols + cols, x * 2.0, mask=mask)
    tl.store(loaded_ptr + row * BLOCK + cols, x)  # the block as loaded, `other` in the masked lanes


@triton.jit
def head_tile_kernel(x_ptr, out_ptr, T, K, BT: tl.constexpr, BK: tl.constexpr):
    # a linear-attention tile: instance `pid` reads rows of head pid; the column block index is computed
    # per instance but is the same for all, and the block is wider than the head (BK > K)
    pid = tl.program_id(0)
    i_k = pid // 1000
    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    mask = (o_t < T)[:, None] & (o_k < K)[None, :]
    p = x_ptr + pid * K + o_t[:, None] * (K * 4) + o_k[None, :]
    tl.store(out_ptr + pid * BT * BK + o_t[:, None] * BK + o_k[None, :], tl.load(p, mask=mask, other=-1.0) * 3.0)


@triton.jit
def select_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.where(x > y, x, y))  # a condition that differs lane by lane


@triton.jit
def heads_by_chunks_kernel(x_ptr, out_ptr, H: tl.constexpr, C: tl.constexpr, D: tl.constexpr):
    # instance pid: head pid % H of chunk pid // H of a (T, H, D) tensor; its tile is C rows of D
    pid = tl.program_id(0)
    i_h, i_c = pid % H, pid // H
    rows = i_c * C + tl.arange(0, C)
    p = rows[:, None] * (H * D) + i_h * D + tl.arange(0, D)[None, :]
    tl.store(out_ptr + p, tl.load(x_ptr + p) * 2.0 + 1.0)


@triton.jit
def gather_rows_kernel(idx_ptr, x_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.load(idx_ptr + pid)
    cols = tl.arange(0, D)
    tl.store(out_ptr + pid * D + cols, tl.load(x_ptr + src * D + cols) + 0.5)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _run(fn: Any, grid: tuple[int, ...], args: list[Any], **constexprs: Any) -> tuple[list[Any], list[Any]]:
    import inspect

    def bound(values: list[Any]) -> dict[str, Any]:
        b = inspect.signature(fn.fn).bind(*values, **constexprs)
        b.apply_defaults()
        return dict(b.arguments)

    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    exact = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    interpreter.execute(fn, (), bound(exact), grid3, None)
    fast = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    assert batched.execute(fn, bound(fast), grid3) is None
    for x, y in zip(exact, fast):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x.view(torch.uint8), y.view(torch.uint8)), (x, y)
    return exact, fast


@pytest.fixture()
def counts() -> Any:
    before = dict(batched.STATS)
    return lambda key: batched.STATS[key] - before[key]


def test_strided_rows_negative_stride_and_constant_mask(counts: Any) -> None:
    x = torch.randn(6, 64, generator=_gen(1))
    _, (_, out, *_) = _run(reverse_rows_kernel, (6,), [x, torch.zeros(6, 64), 64, 64], BLOCK=64)
    assert torch.equal(out, (x * 2.0).flip(1))
    assert counts("formula_loads") == 1 and counts("formula_stores") == 1
    assert counts("constant_compares") == 1  # 64 columns, a block of 64: the mask is all true


def test_masked_tail_leaving_the_storage(counts: Any) -> None:
    x = torch.randn(1000, generator=_gen(2))
    _, (_, out, _) = _run(tail_kernel, (4,), [x, torch.zeros(1000), 1000], BLOCK=256)
    assert torch.equal(out, x + 1.0)
    # the last block's masked lanes lie past the storage: the inner blocks as one view, that one by index
    assert counts("formula_loads") == 1 and counts("formula_stores") == 1


def test_rows_with_lanes_past_the_storage_edge(counts: Any) -> None:
    # 781 columns in blocks of 1024: every row's masked lanes run into the next row, the last row's
    # past the storage; instances whose lanes stay inside are read and written as one view
    x = torch.randn(5, 781, generator=_gen(8))
    _, (_, out, *_) = _run(reverse_rows_kernel, (5,), [x, torch.zeros(5, 781), 781, 781], BLOCK=1024)
    assert torch.equal(out, (x * 2.0).flip(1))
    assert counts("formula_loads") == 1 and counts("formula_stores") == 1


def test_masked_lanes_inside_the_storage_get_other(counts: Any) -> None:
    x = torch.randn(1024, generator=_gen(3))
    out = torch.zeros(1024)
    _run(tail_kernel, (4,), [x, out, 1000], BLOCK=256)
    assert counts("formula_loads") == 1 and counts("formula_stores") == 1


def test_instances_writing_the_same_elements(counts: Any) -> None:
    x = torch.randn(5 * 32, generator=_gen(4))
    _, (_, out) = _run(same_target_kernel, (5,), [x, torch.zeros(32)], BLOCK=32)
    assert torch.equal(out, x[-32:])
    assert counts("formula_stores") == 0  # one element written by several lanes: by address, in order


def test_scattered_rows_with_repeated_targets(counts: Any) -> None:
    idx = torch.tensor([3, 0, 3, 5, 1, 0])
    x = torch.randn(6, 16, generator=_gen(5))
    _, (_, _, out) = _run(scatter_rows_kernel, (6,), [idx, x, torch.zeros(8, 16)], D=16)
    assert torch.equal(out[3], x[2]) and torch.equal(out[0], x[5])
    assert counts("formula_stores") == 1
    assert counts("row_accesses") == 1  # the rows written whole, in instance order


def test_two_axis_tiles(counts: Any) -> None:
    x = torch.randn(64, 96, generator=_gen(6))
    _, (_, out, *_) = _run(tile_2d_kernel, (4, 3), [x, torch.zeros(96 * 64), 64, 96, 96, 1], BM=16, BN=32)
    assert torch.equal(out.view(96, 64), x.t())
    # tiles of a 2-D grid are not evenly spaced in launch order: indexed, not one view
    assert counts("formula_loads") == 1 and counts("formula_stores") == 1 and counts("constant_compares") == 2


def test_two_axis_tiles_with_edges(counts: Any) -> None:
    x = torch.randn(50, 70, generator=_gen(6))
    _, (_, out, *_) = _run(tile_2d_kernel, (4, 3), [x, torch.zeros(70 * 50), 50, 70, 70, 1], BM=16, BN=32)
    assert torch.equal(out.view(70, 50), x.t())


@pytest.mark.parametrize("n", [32, 0, 20])
def test_select_on_a_constant_condition(counts: Any, n: int) -> None:
    x = torch.randn(3, 32, generator=_gen(9))
    _, (_, out, _) = _run(where_kernel, (3,), [x, torch.zeros(3, 32), n], BLOCK=32)
    assert torch.equal(out, torch.where(torch.arange(32) < n, x - 1.0, torch.tensor(0.5)))
    assert counts("constant_selects") == (0 if n == 20 else 1)  # all lanes, no lane, some lanes


@pytest.mark.parametrize("m", [32, 20])
def test_modulo_inside_the_range_stays_a_formula(counts: Any, m: int) -> None:
    x = torch.randn(m, 16, generator=_gen(10))
    _, (_, out, *_) = _run(wrap_rows_kernel, (4,), [x, torch.zeros(32, 16), m], N=16, BM=8)
    assert torch.equal(out, x[torch.arange(32) % m] + 1.0)
    # 32 rows of 32: no row wraps, the load is a strided view; of 20, rows wrap and the addresses decide
    assert counts("formula_loads") == (1 if m == 32 else 0)


def test_replay_reuses_what_program_ids_and_scalars_fix(counts: Any) -> None:
    # the offsets and the tail mask depend on program ids and `n` only: a replay with the same grid and
    # `n` takes them from the previous one; another `n` makes them again; every result the interpreter's
    for seed, n in enumerate([1000, 1000, 1000, 900, 1000]):
        x = torch.randn(1000, generator=_gen(20 + seed))
        _, (_, out, _) = _run(tail_kernel, (4,), [x, torch.zeros(1000), n], BLOCK=256)
        assert torch.equal(out[:n], x[:n] + 1.0) and not out[n:].any()
    assert counts("reused_statics") >= 2


@pytest.mark.parametrize("hole", [-1, 10])
def test_mask_keeping_a_box_of_lanes(counts: Any, hole: int) -> None:
    x = torch.randn(6, 50, generator=_gen(30))
    _, (_, out, loaded, *_) = _run(row_box_kernel, (6,), [x, torch.full((6, 50), 0.25), torch.zeros(6, 64), 50, hole],
                                   BLOCK=64)
    lanes = torch.arange(64)
    keep = (lanes < 50) & (lanes != hole)
    assert torch.equal(loaded, torch.where(keep, torch.nn.functional.pad(x, (0, 14)), torch.tensor(-3.0)))
    assert torch.equal(out, torch.where(keep[:50], x * 2.0, torch.tensor(0.25)))
    # the load and the store as the 50 kept columns, unmasked; a mask with a hole keeps no rectangle
    assert counts("boxed_masks") == (2 if hole < 0 else 0)


def test_column_test_the_same_for_every_instance_keeps_a_box(counts: Any) -> None:
    x = torch.randn(16, 4, 8, generator=_gen(40))  # 16 rows of 4 heads of 8
    _, (_, out, *_) = _run(head_tile_kernel, (4,), [x, torch.zeros(4, 16, 16), 16, 8], BT=16, BK=16)
    loaded = torch.full((4, 16, 16), -1.0)
    loaded[:, :, :8] = x.permute(1, 0, 2)
    assert torch.equal(out, loaded * 3.0)
    # the column test is made once for all instances, the row test is a constant: the mask is a box
    assert counts("boxed_masks") == 1 and counts("formula_loads") == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8])
def test_select_on_a_condition_per_lane(counts: Any, dtype: torch.dtype) -> None:
    if dtype.is_floating_point:
        x, y = torch.randn(4, 64, generator=_gen(50)).to(dtype), torch.randn(4, 64, generator=_gen(51)).to(dtype)
        x[0, :4] = torch.tensor([float("nan"), -0.0, float("inf"), 0.0])  # bits a branchless select must keep
        y[0, :4] = torch.tensor([1.0, 0.0, float("nan"), -0.0])
    else:
        x, y = (torch.randint(-100, 100, (4, 64), generator=_gen(s)).to(dtype) for s in (52, 53))
    _, (_, _, out) = _run(select_kernel, (4,), [x, y, torch.zeros(4, 64, dtype=dtype)], BLOCK=64)
    assert torch.equal(out.view(-1).view(torch.uint8), torch.where(x > y, x, y).view(-1).view(torch.uint8))
    assert counts("branchless_selects") == 1


def test_instances_on_a_grid_of_two_axes(counts: Any) -> None:
    x = torch.randn(32, 3, 8, generator=_gen(60))  # 4 chunks of 8 rows, 3 heads of 8
    _, (_, out, *_) = _run(heads_by_chunks_kernel, (12,), [x, torch.zeros(32, 3, 8)], H=3, C=8, D=8)
    assert torch.equal(out, x * 2.0 + 1.0)
    # instances are not evenly spaced (3 heads, then the next chunk): one view with two instance axes
    assert counts("formula_loads") == 1 and counts("formula_stores") == 1
    assert counts("grid_accesses") == 2


def test_scattered_rows_read_whole_off_the_storage_start(counts: Any) -> None:
    storage = torch.randn(3 + 8 * 16, generator=_gen(70))
    x = storage[3:].view(8, 16)  # rows 3 elements into their storage: every row at that phase
    idx = torch.tensor([7, 0, 7, 2, 5, 1])
    _, (_, _, out) = _run(gather_rows_kernel, (6,), [idx, x, torch.zeros(6, 16)], D=16)
    assert torch.equal(out, x[idx] + 0.5)
    assert counts("row_accesses") == 1 and counts("formula_loads") == 1  # the rows, read whole


@triton.jit
def tail_again_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # tail_kernel, with tapes of its own
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=1.5) + 1.0, mask=mask)


def test_replay_reuses_address_arithmetic_only_for_the_same_memory(counts: Any) -> None:
    # the pointer offsets of a launch that passes the same tensors again are taken from the previous
    # replay; the loads still read the memory anew (changed contents are seen), and another output
    # tensor (another address) gets its own offsets: written there, the first output left alone
    x = torch.randn(1000, generator=_gen(50))
    first, second = torch.zeros(1000), torch.full((1000,), 9.0)

    def launch(out: torch.Tensor, n: int) -> None:
        bound = {"x_ptr": x, "out_ptr": out, "n": n, "BLOCK": 256}
        assert batched.execute(tail_again_kernel, bound, (4, 1, 1)) is None

    for _ in range(3):
        launch(first, 1000)
    assert torch.equal(first, x + 1.0)
    assert counts("reused_addresses") >= 1
    x.mul_(-2.0)  # same address, new contents
    launch(first, 1000)
    assert torch.equal(first, x + 1.0)
    reused = counts("reused_addresses")
    launch(second, 1000)
    assert torch.equal(second, x + 1.0) and torch.equal(first, x + 1.0)
    assert counts("reused_addresses") == reused  # a new address: the offsets made again
    launch(second, 600)  # another scalar: the tail mask made again
    assert torch.equal(second, x + 1.0)
    launch(second, 1000)
    assert counts("reused_addresses") == reused + 1


@triton.jit
def add_mod_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + (n % 7).to(x_ptr.dtype.element_ty))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_arguments_bound_again_follow_dtype_address_and_scalar(dtype: torch.dtype) -> None:
    # the batched binding keeps each tensor class and dtype's pointer type and an int32 scalar's type:
    # a launch with another dtype, another tensor, an int past int32's range gets its own
    x = torch.arange(64).to(dtype)
    for n in (5, 12, 2**40 + 3, 5):
        for out in (torch.zeros(64, dtype=dtype), torch.zeros(64, dtype=dtype)):
            _, (_, got, _) = _run(add_mod_kernel, (4,), [x, out, n], BLOCK=16)
            assert got.dtype == dtype and torch.equal(got, x + n % 7)
