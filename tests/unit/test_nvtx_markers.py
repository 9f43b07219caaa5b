"""torch.cuda.nvtx's stand-in where torch has no NVTX (cpu and ascend): markers that keep NVTX's answers."""

from __future__ import annotations

from cudashim.aliases._nvtx import nvtx_table


def test_push_and_pop_answer_the_nesting_depth_as_nvtx_does():
    t = nvtx_table()
    assert [t["range_push"]("a"), t["range_push"]("b")] == [0, 1]  # zero-based depth of the range started
    assert [t["range_pop"](), t["range_pop"]()] == [1, 0]  # ...and of the range ended
    assert t["range_pop"]() == -1  # none open


def test_range_is_a_context_manager_and_a_decorator():
    rng = nvtx_table()["range"]
    with rng("step"):
        pass

    @rng("fn")
    def f(x: int) -> int:
        return x + 1

    assert f(1) == 2


def test_each_table_counts_its_own_depth():
    a, b = nvtx_table(), nvtx_table()
    a["range_push"]("x")
    assert b["range_push"]("y") == 0
