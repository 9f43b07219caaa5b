"""torch.compile's modes and templates on cuda tensors, written as plain CUDA code: each check passes on a
real GPU and must pass on the emulated device. test_compile_modes.py runs them on the emulated device, and
with no shim where torch.cuda is really available, so CUDA itself is the oracle:

    CUDASHIM_DISABLE=1 python tests/emulated/_runner.py compile_checks

mode="reduce-overhead" is Inductor's CUDA graph trees: the first call warms up, the second records a
graph, later calls replay it; outputs of a replay are overwritten by the next replay, and reading one
afterwards raises. Each check compiles its own function; they share one process.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _tree_nodes() -> int:
    """Graphs recorded by the CUDA graph trees of the current device (0: the trees were not used)."""
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_container(torch.cuda.current_device()).tree_manager
    return 0 if manager is None else len(list(manager.get_roots())) + sum(
        r.num_descendants() for r in manager.get_roots())


@check
def reduce_overhead_replays_with_new_inputs() -> None:
    torch._dynamo.reset()

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w).sum(-1) + 1

    cf = torch.compile(f, mode="reduce-overhead")
    w = torch.randn(16, 16, device="cuda")
    before = _tree_nodes()
    for step in range(5):
        x = torch.randn(8, 16, device="cuda")
        got = cf(x, w)
        assert torch.allclose(got, f(x, w), atol=1e-5), (step, got, f(x, w))
    assert _tree_nodes() > before, "no CUDA graph was recorded"
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 0, dict(
        torch._dynamo.utils.counters["inductor"])


@check
def reduce_overhead_output_overwritten_by_a_later_run_raises() -> None:
    # the example of PyTorch's CUDA graph trees documentation: the first call's output is overwritten
    # by the second (which records the graph), and reading it raises
    torch._dynamo.reset()
    cf = torch.compile(lambda x: x @ x, mode="reduce-overhead")
    x = torch.randn(10, 10, device="cuda")
    y1 = cf(x)
    y2 = cf(x)
    assert torch.allclose(y2, x @ x, atol=1e-5)
    try:
        y1.sum()
    except RuntimeError as e:
        assert "overwritten by a subsequent run" in str(e), e
    else:
        raise AssertionError("an output overwritten by a later run was read without an error")
    a, b = cf(x), cf(x)  # replays hand out the same output tensor, over the graph's memory
    assert a is b and torch.allclose(a, x @ x, atol=1e-5)


@check
def reduce_overhead_output_kept_with_mark_step_and_clone() -> None:
    torch._dynamo.reset()
    cf = torch.compile(lambda x: x * 2 + 1, mode="reduce-overhead")
    outs = []
    for i in range(5):
        torch.compiler.cudagraph_mark_step_begin()
        outs.append(cf(torch.full((4,), float(i), device="cuda")).clone())
    assert [o[0].item() for o in outs] == [1.0, 3.0, 5.0, 7.0, 9.0], outs


@check
def reduce_overhead_training_step_equals_eager() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).cuda()
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).cuda()
    ref.load_state_dict(model.state_dict())
    cm = torch.compile(model, mode="reduce-overhead")
    for step in range(4):
        x = torch.randn(5, 8, device="cuda")
        torch.compiler.cudagraph_mark_step_begin()
        cm(x).square().sum().backward()
        ref(x).square().sum().backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-5), (step, name)
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)


@check
def reduce_overhead_second_shape_records_a_second_graph() -> None:
    torch._dynamo.reset()
    cf = torch.compile(lambda x: torch.softmax(x, -1) * 3, mode="reduce-overhead", dynamic=False)
    for n in (4, 4, 4, 6, 6, 6, 4):
        x = torch.randn(3, n, device="cuda")
        assert torch.allclose(cf(x), torch.softmax(x, -1) * 3, atol=1e-6), n


@check
def max_autotune_matches_eager() -> None:
    torch._dynamo.reset()

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a @ b) + 1

    cf = torch.compile(f, mode="max-autotune")
    for _ in range(3):
        a, b = torch.randn(32, 64, device="cuda"), torch.randn(64, 16, device="cuda")
        assert torch.allclose(cf(a, b), f(a, b), atol=1e-4)


@check
def sdpa_compiled_with_dynamic_shapes() -> None:
    torch._dynamo.reset()

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    cf = torch.compile(f, dynamic=True)
    for n in (8, 12, 20):
        q, k, v = (torch.randn(1, 2, n, 16, device="cuda") for _ in range(3))
        assert torch.allclose(cf(q, k, v), f(q, k, v), atol=1e-5), n


@check
def sdpa_compiled_recompiles_dynamic_on_a_second_length() -> None:
    # no dynamic= given: the second sequence length makes Dynamo recompile with that dimension dynamic
    torch._dynamo.reset()

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    cf = torch.compile(f)
    for n in (8, 12, 20):
        q, k, v = (torch.randn(2, 2, n, 16, device="cuda") for _ in range(3))
        mask = torch.ones(n, n, device="cuda", dtype=torch.bool).tril()
        assert torch.allclose(cf(q, k, v, mask), f(q, k, v, mask), atol=1e-5), n


@check
def flex_attention_compiled_for_inference() -> None:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.reset()

    def causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return q >= kv

    def halve(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return score * 0.5

    n = 128
    mask = create_block_mask(causal, 1, 1, n, n, device="cuda")
    q, k, v = (torch.randn(1, 2, n, 16, device="cuda") for _ in range(3))
    cf = torch.compile(flex_attention)
    with torch.no_grad():
        got = cf(q, k, v, score_mod=halve, block_mask=mask)
        want = flex_attention(q, k, v, score_mod=halve, block_mask=mask)
    assert got.device.type == "cuda" and torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


@check
def fft_compiled_meets_its_meta_strides() -> None:
    """torch.fft under torch.compile: Inductor calls _fft_r2c as an extern kernel and asserts its output has
    the strides its meta function states (cuFFT's layout); the device's must meet them."""
    torch._dynamo.reset()
    x = torch.randn(5, 6, 6, device="cuda")
    got = torch.compile(lambda t: torch.fft.rfftn(t).abs() + 1)(x)
    want = torch.fft.rfftn(x).abs() + 1
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
