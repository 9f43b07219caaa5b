"""The batched execution of Triton launches gives the exact interpreter's results, or says why it cannot.

Each kernel runs twice on equal inputs: through the route's exact interpreter (Triton's GridExecutor,
one program instance after another, with the route's fixes: float scalars, bf16 in fp32 rounded to
nearest even) and through the batched executor; every output must be equal bit for bit. The fallback
tests go through the route's seam: the launch's path names the reason, memory is left untouched by
the refused attempt, and the exact interpreter's result is the right one.
"""

from __future__ import annotations

from typing import Any, Callable

import batched_kernels as K
import pytest
import torch

from cudashim.triton_route import batched, interpreter, launch
from cudashim.triton_route.batched import fallback_reason_cached, run_batched


@pytest.fixture(autouse=True)
def _nested_jit_calls() -> Any:
    """Outside `cudashim run` the route is not installed: bind its nested-call entry for these tests."""
    import cudashim.triton_route as route
    from triton.runtime.jit import JITFunction

    original = JITFunction.__dict__["__call__"]
    JITFunction.__call__ = route._call(original)  # type: ignore[method-assign]
    yield
    JITFunction.__call__ = original  # type: ignore[method-assign]


def _bound(fn: Any, args: list[Any], constexprs: dict[str, Any]) -> dict[str, Any]:
    import inspect

    b = inspect.signature(fn.fn).bind(*args, **constexprs)
    b.apply_defaults()
    return dict(b.arguments)


def _grid3(grid: tuple[int, ...]) -> tuple[int, int, int]:
    return tuple(grid) + (1,) * (3 - len(grid))  # type: ignore[return-value]


def _clone(args: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _same(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype
            assert torch.equal(x.view(torch.uint8) if x.dtype == torch.bfloat16 else x,
                               y.view(torch.uint8) if y.dtype == torch.bfloat16 else y), (x, y)


def _both(fn: Any, grid: Any, args: list[Any], **constexprs: Any) -> tuple[list[Any], list[Any], str | None]:
    exact = _clone(args)
    interpreter.execute(fn, (), _bound(fn, exact, constexprs), _grid3(grid), None)
    fast = _clone(args)
    reason = batched.execute(fn, _bound(fn, fast, constexprs), _grid3(grid))
    return exact, fast, reason


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _trinix(module: str, kernel: str) -> Any:
    """A kernel of trinix (a pinned subject, tests/requirements-subjects.txt), unmodified."""
    return getattr(pytest.importorskip(f"trinix.kernels.{module}"), kernel)


CASES: dict[str, Callable[[], tuple[Any, Any, list[Any], dict[str, Any]]]] = {
    "elementwise": lambda: (_trinix("quickgelu_kernel", "quickgelu_forward_kernel"), (7,),
                            [torch.zeros(1000), torch.randn(1000, generator=_gen(0)), 1000], {"BLOCK_SIZE": 256}),
    # more instances than the first group: the launch is run in several groups
    "elementwise_many_groups": lambda: (_trinix("quickgelu_kernel", "quickgelu_forward_kernel"), (300,),
                                        [torch.zeros(4790), torch.randn(4790, generator=_gen(2)), 4790],
                                        {"BLOCK_SIZE": 16}),
    "axpy": lambda: (K.axpy_kernel, (7,), [torch.randn(1000, generator=_gen(0)), torch.randn(1000, generator=_gen(1)),
                                           torch.zeros(1000), 1000], {"BLOCK_SIZE": 256}),
    "rmsnorm_one_row_each": lambda: (_trinix("rmsnorm_kernel", "rmsnorm_forward_kernel"), (37,),
                                     [torch.zeros(37, 100), 100, torch.randn(37, 100, generator=_gen(4)), 100,
                                      torch.randn(100, generator=_gen(16)), torch.zeros(37)],
                                     {"n_cols": 100, "eps": 1e-6, "BLOCK_SIZE": 128}),
    # a persistent loop: instances start at different rows, some run one more iteration than others
    "row_stride_persistent": lambda: (K.row_stride_kernel, (8,), [torch.randn(37, 100, generator=_gen(5)),
                                                                  torch.zeros(37, 100), 37, 100], {"BLOCK": 128}),
    "layer_norm": lambda: (_trinix("layernorm_kernel", "layernorm_forward_kernel"), (16,),
                           [torch.zeros(16, 300), 300, torch.randn(16, 300, generator=_gen(6)), 300,
                            torch.randn(300, generator=_gen(7)), torch.randn(300, generator=_gen(8)), torch.zeros(16),
                            torch.zeros(16)], {"n_cols": 300, "eps": 1e-5, "BLOCK_SIZE": 512}),
    "dot_fp16_loop_nested_jit": lambda: (
        K.dot_loop_kernel, (3,), [torch.randn(48, 96, generator=_gen(9)).half(),
                                  torch.randn(96, 32, generator=_gen(10)).half(), torch.zeros(48, 32).half(), 96],
        {"BM": 16, "BN": 32, "BK": 32}),
    "reductions_custom_combine_argmax_scan": lambda: (
        K.reductions_kernel, (3,), [torch.randn(3, 8, 16, generator=_gen(11)), torch.zeros(3, 25),
                                    torch.zeros(3, 9, dtype=torch.int32), torch.zeros(3, 8, 16)], {"M": 8, "N": 16}),
    "transpose": lambda: (K.transpose_kernel, (3,), [torch.randn(3, 8, 16, generator=_gen(12)),
                                                     torch.zeros(3, 16, 8)], {"M": 8, "N": 16}),
    "grid_2d": lambda: (K.grid2d_kernel, (5, 3), [torch.randn(5, 40, generator=_gen(13)), torch.zeros(5, 40), 40],
                        {"BLOCK": 16}),
    # a loaded value decides an early return: the instances are split into two groups
    "bf16_float_scalar": lambda: (K.bf16_kernel, (6,), [torch.randn(6 * 64, generator=_gen(15)).bfloat16(),
                                                        torch.zeros(6 * 64).bfloat16(),
                                                        torch.zeros(12).bfloat16(), 0.37], {"BLOCK": 64}),
    "early_exit_split": lambda: (K.early_exit_kernel, (8,), [torch.tensor([3, -1, 0, 5, -1, 1, 2, -1]),
                                                             torch.randn(8, 16, generator=_gen(14)),
                                                             torch.zeros(8, 16)], {"D": 16}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_equals_interpreter(name: str) -> None:
    fn, grid, args, constexprs = CASES[name]()
    exact, batched, reason = _both(fn, grid, args, **constexprs)
    assert reason is None, reason
    _same(exact, batched)
    # the kernel wrote something: an output left as it was would also compare equal
    assert any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(exact, args))


def test_grid_callable_gets_the_arguments() -> None:
    x, y = torch.randn(500, generator=_gen(20)), torch.randn(500, generator=_gen(21))
    out = torch.zeros(500)

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return ((meta["n_elements"] + meta["BLOCK_SIZE"] - 1) // meta["BLOCK_SIZE"],)

    assert run_batched(K.axpy_kernel, grid, (x, y, out, 500), {"BLOCK_SIZE": 64}) is None
    assert torch.equal(out, 2 * x + y)


def test_bad_grid_is_named() -> None:
    with pytest.raises(ValueError, match="grid"):
        run_batched(K.axpy_kernel, (1, 1, 1, 1), (torch.zeros(4), torch.zeros(4), torch.zeros(4), 4),
                    {"BLOCK_SIZE": 4})


# -- one test per fallback reason, through the route's seam: the batched executor declines (its reason is
#    the launch's path), leaves memory as it was, the exact interpreter computes the result


@pytest.fixture()
def seam() -> Any:
    saved = list(launch._executors)
    launch._executors[:] = [("batched", batched.execute)]
    launch.reset()
    yield launch
    launch._executors[:] = saved


def _via_seam(fn: Any, grid: tuple[int, ...], args: list[Any], constexprs: dict[str, Any]) -> str:
    return launch.execute(fn, _bound(fn, args, constexprs), _grid3(grid), None)


def test_fallback_atomics_across_instances(seam: Any) -> None:
    x = torch.randn(6, 32, generator=_gen(30))
    out = torch.zeros(1)
    assert batched.execute(K.atomic_sum_kernel, _bound(K.atomic_sum_kernel, [x, out], {"BLOCK": 32}), (6, 1, 1)) \
        == "atomics across instances: exact interpreter"
    assert out.item() == 0.0
    assert fallback_reason_cached(K.atomic_sum_kernel) == "atomics across instances: exact interpreter"
    path = _via_seam(K.atomic_sum_kernel, (6,), [x, out], {"BLOCK": 32})
    assert path == "interpreter|batched: atomics across instances: exact interpreter"
    expected = torch.zeros(1)
    for row in x:  # the interpreter adds the instances' sums in program order
        expected += torch.tensor(row.numpy().sum(dtype="float32"))
    assert torch.equal(out, expected)


def test_fallback_divergent_loop_trip_counts(seam: Any) -> None:
    out = torch.zeros(40, 16)
    reason = batched.execute(K.divergent_loop_kernel, _bound(K.divergent_loop_kernel, [out], {"BLOCK": 16}),
                             (40, 1, 1))
    assert reason is not None and reason.startswith("divergent control flow at batched_kernels.py:"), reason
    # the groups that ran before the split limit was reached were undone
    assert torch.count_nonzero(out) == 0
    path = _via_seam(K.divergent_loop_kernel, (40,), [out], {"BLOCK": 16})
    assert path == "interpreter|batched: " + reason
    expected = torch.zeros(40, 16)
    ar = torch.arange(16, dtype=torch.float32)
    for pid in range(40):
        for i in range(pid + 1):
            expected[pid] += (ar + i) * 0.5
    assert torch.equal(out, expected)


def test_fallback_unsupported_op(seam: Any) -> None:
    x = torch.randint(0, 8, (4, 32), dtype=torch.int32, generator=_gen(31))
    out = torch.zeros(4, 8, dtype=torch.int32)
    reason = batched.execute(K.histogram_kernel, _bound(K.histogram_kernel, [x, out], {"BLOCK": 32, "BINS": 8}),
                             (4, 1, 1))
    assert reason == "unsupported op create_histogram: exact interpreter"
    assert torch.count_nonzero(out) == 0
    path = _via_seam(K.histogram_kernel, (4,), [x, out], {"BLOCK": 32, "BINS": 8})
    assert path == "interpreter|batched: unsupported op create_histogram: exact interpreter"
    assert torch.equal(out, torch.stack([torch.bincount(r, minlength=8).int() for r in x]))


def test_batched_path_is_reported(seam: Any) -> None:
    x, y = torch.randn(300, generator=_gen(32)), torch.randn(300, generator=_gen(33))
    out = torch.zeros(300)
    assert _via_seam(K.axpy_kernel, (3,), [x, y, out, 300], {"BLOCK_SIZE": 128}) == "batched"
    assert torch.equal(out, 2 * x + y)


def test_one_instance_runs_batched() -> None:
    x = torch.randn(16, generator=_gen(40))
    out = torch.zeros(16)
    assert run_batched(K.axpy_kernel, (1,), (x, x, out, 16), {"BLOCK_SIZE": 16}) is None
    assert torch.equal(out, 2 * x + x)


@pytest.mark.parametrize("name", sorted(CASES))
def test_replayed_launch_equals_interpreter(name: str) -> None:
    """A second launch of the same specialization replays the first one's tape, on new data."""
    from cudashim.triton_route import batched

    fn, grid, args, constexprs = CASES[name]()
    assert run_batched(fn, grid, tuple(_clone(args)), constexprs) is None  # traced (or replayed) once
    before = dict(batched.STATS)
    fresh = [a.clone().normal_(generator=_gen(99)) if isinstance(a, torch.Tensor) and a.is_floating_point() and
             a.count_nonzero() else (a.clone() if isinstance(a, torch.Tensor) else a) for a in args]
    exact, replayed, reason = _both(fn, grid, fresh, **constexprs)
    assert reason is None, reason
    _same(exact, replayed)
    assert batched.STATS["replayed_groups"] > before["replayed_groups"], batched._UNTAPED.get(fn.fn)


def test_replay_checks_decisions() -> None:
    """A tape recorded where every slot is valid is not replayed where one is -1: the decision differs."""
    from cudashim.triton_route import batched

    src = torch.randn(8, 16, generator=_gen(50))
    slots = torch.tensor([3, 4, 0, 5, 6, 1, 2, 7])
    assert run_batched(K.early_exit_kernel, (8,), (slots, src, torch.zeros(8, 16)), {"D": 16}) is None
    slots2 = torch.tensor([3, -1, 0, 5, -1, 1, 2, -1])
    exact, batched_out, reason = _both(K.early_exit_kernel, (8,), [slots2, src, torch.zeros(8, 16)], D=16)
    assert reason is None
    _same(exact, batched_out)
    assert batched_out[2][4].count_nonzero() == 0 and batched_out[2][3].count_nonzero() == 16
