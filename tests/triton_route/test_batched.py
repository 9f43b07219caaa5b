"""The batched execution of Triton launches gives the exact interpreter's results, or says why it cannot.

Each kernel runs twice on equal inputs: through Triton's own interpreter (GridExecutor, one program
instance after another) and through `run_batched`; every output must be equal bit for bit. The fallback
tests show that a launch the batched execution refuses leaves memory untouched and names its reason,
and that the exact interpreter then computes the right result.
"""

from __future__ import annotations

from typing import Any, Callable

import batched_kernels as K
import pytest
import torch

from cudashim.triton_route.batched import fallback_reason_cached, run_batched, run_interpreter


def _clone(args: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _same(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype
            assert torch.equal(x.view(torch.uint8) if x.dtype == torch.bfloat16 else x,
                               y.view(torch.uint8) if y.dtype == torch.bfloat16 else y), (x, y)


def _both(fn: Any, grid: Any, args: list[Any], **constexprs: Any) -> tuple[list[Any], str | None]:
    exact = _clone(args)
    run_interpreter(fn, grid, tuple(exact), constexprs)
    batched = _clone(args)
    reason = run_batched(fn, grid, tuple(batched), constexprs)
    return exact, batched, reason  # type: ignore[return-value]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


CASES: dict[str, Callable[[], tuple[Any, Any, list[Any], dict[str, Any]]]] = {
    "vector_add": lambda: (K.add_kernel, (7,), [torch.randn(1000, generator=_gen(0)),
                                                torch.randn(1000, generator=_gen(1)), torch.zeros(1000), 1000],
                           {"BLOCK_SIZE": 256}),
    # more instances than the first group: the launch is run in several groups
    "vector_add_many_groups": lambda: (K.add_kernel, (300,), [torch.randn(4790, generator=_gen(2)),
                                                              torch.randn(4790, generator=_gen(3)),
                                                              torch.zeros(4790), 4790], {"BLOCK_SIZE": 16}),
    "softmax_one_row_each": lambda: (K.softmax_kernel, (37,), [torch.zeros(37, 100),
                                                               torch.randn(37, 100, generator=_gen(4)),
                                                               100, 100, 37, 100], {"BLOCK_SIZE": 128}),
    # a persistent loop: instances start at different rows, some run one more iteration than others
    "softmax_persistent": lambda: (K.softmax_kernel, (8,), [torch.zeros(37, 100),
                                                            torch.randn(37, 100, generator=_gen(5)),
                                                            100, 100, 37, 100], {"BLOCK_SIZE": 128}),
    "layer_norm": lambda: (K.layer_norm_kernel, (16,), [torch.randn(16, 300, generator=_gen(6)),
                                                        torch.zeros(16, 300), torch.randn(300, generator=_gen(7)),
                                                        torch.randn(300, generator=_gen(8)), torch.zeros(16),
                                                        torch.zeros(16), 300, 300, 1e-5], {"BLOCK_SIZE": 128}),
    "matmul_fp16_nested_activation": lambda: (
        K.matmul_kernel, (9,), [torch.randn(80, 96, generator=_gen(9)).half(),
                                torch.randn(96, 72, generator=_gen(10)).half(), torch.zeros(80, 72).half(),
                                80, 72, 96, 96, 1, 72, 1, 72, 1],
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2,
         "ACTIVATION": "leaky_relu"}),
    "reductions_custom_combine_argmax_scan": lambda: (
        K.reductions_kernel, (3,), [torch.randn(3, 8, 16, generator=_gen(11)), torch.zeros(3, 25),
                                    torch.zeros(3, 9, dtype=torch.int32), torch.zeros(3, 8, 16)], {"M": 8, "N": 16}),
    "transpose": lambda: (K.transpose_kernel, (3,), [torch.randn(3, 8, 16, generator=_gen(12)),
                                                     torch.zeros(3, 16, 8)], {"M": 8, "N": 16}),
    "grid_2d": lambda: (K.grid2d_kernel, (5, 3), [torch.randn(5, 40, generator=_gen(13)), torch.zeros(5, 40), 40],
                        {"BLOCK": 16}),
    # a loaded value decides an early return: the instances are split into two groups
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

    assert run_batched(K.add_kernel, grid, (x, y, out, 500), {"BLOCK_SIZE": 64}) is None
    assert torch.equal(out, x + y)


def test_bad_grid_is_named() -> None:
    with pytest.raises(ValueError, match="grid"):
        run_batched(K.add_kernel, (1, 1, 1, 1), (torch.zeros(4), torch.zeros(4), torch.zeros(4), 4),
                    {"BLOCK_SIZE": 4})


# -- one test per fallback reason: the batched execution refuses, leaves memory as it was, the exact
#    interpreter computes the result


def test_fallback_atomics_across_instances() -> None:
    x = torch.randn(6, 32, generator=_gen(30))
    out = torch.zeros(1)
    reason = run_batched(K.atomic_sum_kernel, (6,), (x, out), {"BLOCK": 32})
    assert reason is not None and reason.startswith("atomics across instances"), reason
    assert out.item() == 0.0
    assert fallback_reason_cached(K.atomic_sum_kernel) == reason
    run_interpreter(K.atomic_sum_kernel, (6,), (x, out), {"BLOCK": 32})
    expected = torch.zeros(1)
    for row in x:  # the interpreter adds the instances' sums in program order
        expected += torch.tensor(row.numpy().sum(dtype="float32"))
    assert torch.equal(out, expected)


def test_fallback_divergent_loop_trip_counts() -> None:
    out = torch.zeros(40, 16)
    reason = run_batched(K.divergent_loop_kernel, (40,), (out,), {"BLOCK": 16})
    assert reason is not None and reason.startswith("divergent control flow at batched_kernels.py:"), reason
    # the groups that ran before the split limit was reached were undone
    assert torch.count_nonzero(out) == 0
    run_interpreter(K.divergent_loop_kernel, (40,), (out,), {"BLOCK": 16})
    expected = torch.zeros(40, 16)
    ar = torch.arange(16, dtype=torch.float32)
    for pid in range(40):
        for i in range(pid + 1):
            expected[pid] += (ar + i) * 0.5
    assert torch.equal(out, expected)


def test_fallback_unsupported_op() -> None:
    x = torch.randint(0, 8, (4, 32), dtype=torch.int32, generator=_gen(31))
    out = torch.zeros(4, 8, dtype=torch.int32)
    reason = run_batched(K.histogram_kernel, (4,), (x, out), {"BLOCK": 32, "BINS": 8})
    assert reason == "unsupported op create_histogram: exact interpreter"
    assert torch.count_nonzero(out) == 0
    run_interpreter(K.histogram_kernel, (4,), (x, out), {"BLOCK": 32, "BINS": 8})
    assert torch.equal(out, torch.stack([torch.bincount(r, minlength=8).int() for r in x]))


def test_one_instance_runs_batched() -> None:
    x = torch.randn(16, generator=_gen(40))
    out = torch.zeros(16)
    assert run_batched(K.add_kernel, (1,), (x, x, out, 16), {"BLOCK_SIZE": 16}) is None
    assert torch.equal(out, x + x)


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
