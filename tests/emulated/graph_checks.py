"""CUDA graph semantics, written as plain CUDA code: each check passes on a real GPU and must pass on
the emulated device (issue 18). test_graphs.py runs them on the emulated device, and with no shim
where torch.cuda is really available, so CUDA itself is the oracle.

Each check raises when the semantics differ; they share one process and leave no capture open.
"""

from __future__ import annotations

from typing import Callable

import torch

CHECKS: dict[str, Callable[[], None]] = {}
_CAPTURE_ERROR = "operation not permitted when stream is capturing"
_INVALIDATED = "operation failed due to a previous error during capture"


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _chain(e: BaseException) -> str:
    """The error and what it was raised during (torch.cuda.graph's exit raises over the body's error)."""
    parts = []
    while e is not None:
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__context__
    return " <- ".join(parts)


def _replay_refused(g: torch.cuda.CUDAGraph, what: str) -> None:
    """g holds no captured graph: replay() raises CUDA's error."""
    try:
        g.replay()
    except RuntimeError as e:
        assert "without a preceding successful capture" in str(e), _chain(e)
    else:
        raise AssertionError(what)


def _capture_fails(body: Callable[[], None]) -> str:
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            body()
    except RuntimeError as e:
        return _chain(e)
    raise AssertionError("the capture went through")


@check
def static_input_updated_in_place_between_replays() -> None:
    static_x = torch.zeros(8, device="cuda")
    w = torch.arange(8, dtype=torch.float32, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = static_x * w + 1
    for v in (1.0, 2.0, -3.0):
        static_x.copy_(torch.full((8,), v, device="cuda"))
        g.replay()
        assert torch.equal(static_y, torch.arange(8, dtype=torch.float32, device="cuda") * v + 1), (v, static_y)


@check
def capture_runs_no_in_place_work() -> None:
    x = torch.ones(4, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
        x.mul_(3)
    torch.cuda.synchronize()
    assert x.tolist() == [1.0] * 4, f"capture changed a tensor: {x.tolist()}"
    g.replay()
    assert x.tolist() == [6.0] * 4
    g.replay()
    assert x.tolist() == [21.0] * 4


@check
def outputs_keep_their_address_across_replays() -> None:
    x = torch.randn(16, 16, device="cuda")
    torch.relu(x @ x.t()).sum(dim=1)  # warm-up before capture, as CUDA needs (cuBLAS sets up on first use)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.relu(x @ x.t()).sum(dim=1)
    ptr = y.data_ptr()
    g.replay()
    first = y.clone()
    x.mul_(2)
    g.replay()
    assert y.data_ptr() == ptr
    torch.testing.assert_close(y, first * 4)
    torch.testing.assert_close(y, torch.relu(x @ x.t()).sum(dim=1))


@check
def index_computed_inside_the_capture() -> None:
    table = torch.arange(10, dtype=torch.float32, device="cuda") * 10
    idx = torch.tensor([3, -1, 7], dtype=torch.int32, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = table.index_select(0, idx.long().clamp(min=0))  # a cast, then an index: valid at capture too
    g.replay()
    assert out.tolist() == [30.0, 0.0, 70.0]
    idx.copy_(torch.tensor([9, 0, -5], dtype=torch.int32, device="cuda"))
    g.replay()
    assert out.tolist() == [90.0, 0.0, 0.0]


@check
def softmax_follows_updated_inputs() -> None:
    x = torch.zeros(2, 5, device="cuda", dtype=torch.bfloat16)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        p = torch.softmax(x.float(), dim=-1)
        lp = torch.log_softmax(x, dim=-1)
    x.copy_(torch.arange(10, device="cuda").reshape(2, 5).to(torch.bfloat16))
    g.replay()
    torch.testing.assert_close(p, torch.softmax(x.float(), dim=-1))
    torch.testing.assert_close(lp, torch.log_softmax(x, dim=-1))


@check
def compiled_function_replays_with_updated_inputs() -> None:
    # torch.compile(mode="default") under capture: its kernels (Triton on CUDA, C++ on the emulated
    # device) are recorded, and replay re-runs them on the static inputs as they are then
    @torch.compile(dynamic=False)
    def add_norm(x: torch.Tensor, w: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = x + residual
        residual.copy_(h)  # a mutated input: the compiled kernel writes the caller's tensor
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    @torch.compile(dynamic=False)
    def rows(pos: torch.Tensor) -> torch.Tensor:
        return (pos // 4).clamp(0, 7)

    def eager(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        h = x + r
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    gen = torch.Generator(device="cuda").manual_seed(0)
    x, w, r0 = (torch.randn(4, 32, device="cuda", generator=gen) for _ in range(3))
    residual = r0.clone()
    table = torch.arange(8, dtype=torch.float32, device="cuda") * 10
    pos = torch.tensor([0, 5, 13, 31], device="cuda")
    add_norm(x, w, r0.clone())  # compiled before the capture (compiling inside one is not allowed)
    rows(pos)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = add_norm(x, w, residual)
        picked = table.index_select(0, rows(pos))  # the index is a compiled kernel's output
    assert torch.equal(residual, r0), "the capture ran the compiled kernel on the caller's tensor"
    for step in range(3):
        x.copy_(torch.randn(4, 32, device="cuda", generator=gen))
        residual.copy_(r0)
        pos.copy_(torch.tensor([step, 4 * step + 9, 2, 40], device="cuda"))
        g.replay()
        torch.testing.assert_close(out, eager(x, w, r0), rtol=1e-5, atol=1e-5)  # Triton's reduction order on CUDA
        torch.testing.assert_close(residual, x + r0)
        want = [10.0 * min(max(p // 4, 0), 7) for p in (step, 4 * step + 9, 2, 40)]
        assert picked.tolist() == want, (step, picked.tolist(), want)


@check
def two_graphs_share_a_pool() -> None:
    x = torch.zeros(32, device="cuda")
    outs = {}
    graphs = {}
    pool = None
    for bs in (32, 8, 1):  # nano-vllm's order: the largest batch first, one pool for all
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            outs[bs] = (x[:bs] * 2).cumsum(0) + bs
        if pool is None:
            pool = g.pool()
        graphs[bs] = g
    for step in range(3):
        x.copy_(torch.arange(32, dtype=torch.float32, device="cuda") + step)
        for bs in (1, 8, 32):
            graphs[bs].replay()
            want = ((torch.arange(bs, dtype=torch.float32, device="cuda") + step) * 2).cumsum(0) + bs
            assert torch.equal(outs[bs], want), (bs, step)


@check
def graph_pool_handle_shared_by_two_graphs() -> None:
    pool = torch.cuda.graph_pool_handle()
    a = torch.ones(4, device="cuda")
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1, pool=pool):
        b = a + 1
    with torch.cuda.graph(g2, pool=pool):
        c = b * 10
    g1.replay()
    g2.replay()
    assert c.tolist() == [20.0] * 4 and b.tolist() == [2.0] * 4


@check
def replay_after_reset_raises() -> None:
    x = torch.ones(2, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
    g.replay()
    g.reset()
    _replay_refused(g, "replay after reset() ran")
    assert x.tolist() == [2.0, 2.0]


@check
def replay_before_capture_raises() -> None:
    try:
        torch.cuda.CUDAGraph().replay()
    except RuntimeError as e:
        assert "without a preceding successful capture" in str(e), _chain(e)
    else:
        raise AssertionError("an empty graph replayed")


@check
def keep_graph_then_instantiate() -> None:
    x = torch.zeros(3, device="cuda")
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        x.add_(2)
    g.instantiate()
    g.replay()
    h = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(h):
        x.mul_(5)
    h.replay()  # instantiated by the first replay
    assert x.tolist() == [10.0] * 3


@check
def is_current_stream_capturing() -> None:
    assert not torch.cuda.is_current_stream_capturing()
    seen = []
    g = torch.cuda.CUDAGraph()
    x = torch.zeros(1, device="cuda")
    with torch.cuda.graph(g):
        seen.append(torch.cuda.is_current_stream_capturing())
        x.add_(1)
    assert seen == [True] and not torch.cuda.is_current_stream_capturing()


@check
def item_in_capture_raises() -> None:
    x = torch.ones(3, device="cuda")
    msg = _capture_fails(lambda: x.sum().item())
    assert _CAPTURE_ERROR in msg, msg


def _failed_capture_ran_nothing(g: torch.cuda.CUDAGraph, x: torch.Tensor, value: float) -> None:
    """After a failed capture: the work it recorded on x never ran, and the graph does not replay."""
    torch.cuda.synchronize()
    assert x.tolist() == [value] * x.numel(), f"the failed capture ran its work: {x.tolist()}"
    _replay_refused(g, "the failed capture replayed")


def _refused_then_invalidated(body: Callable[[], None], refusal: str) -> None:
    """body() is refused inside a capture with `refusal` (cudaErrorStreamCaptureUnsupported and kin, as
    torch.AcceleratorError "CUDA error: ..."), and the capture is invalidated: leaving torch.cuda.graph
    ends it with cudaErrorStreamCaptureInvalidated, raised over the body's error."""
    accel = getattr(torch, "AcceleratorError", RuntimeError)
    x = torch.ones(3, device="cuda")
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            x.add_(1)
            body()
    except RuntimeError as e:
        inner = e.__context__
        assert isinstance(e, accel) and f"CUDA error: {_INVALIDATED}" in str(e), _chain(e)
        assert isinstance(inner, accel) and f"CUDA error: {refusal}" in str(inner), _chain(e)
    else:
        raise AssertionError("the capture went through")
    _failed_capture_ran_nothing(g, x, 1.0)


@check
def synchronize_in_capture_raises() -> None:
    _refused_then_invalidated(torch.cuda.synchronize, _CAPTURE_ERROR)  # cudaDeviceSynchronize


@check
def stream_synchronize_in_capture_raises() -> None:
    _refused_then_invalidated(lambda: torch.cuda.current_stream().synchronize(), _CAPTURE_ERROR)  # cudaStreamSynchronize


@check
def stream_query_in_capture_raises() -> None:
    _refused_then_invalidated(lambda: torch.cuda.current_stream().query(), _CAPTURE_ERROR)  # cudaStreamQuery


def _captured_event() -> torch.cuda.Event:
    e = torch.cuda.Event()
    e.record()  # on the capturing stream: a captured event
    return e


@check
def event_synchronize_in_capture_raises() -> None:
    # cudaEventSynchronize on an event last recorded in a capturing stream (cudaErrorCapturedEvent)
    _refused_then_invalidated(lambda: _captured_event().synchronize(), "operation not permitted")


@check
def event_query_in_capture_raises() -> None:
    _refused_then_invalidated(lambda: _captured_event().query(), "operation not permitted")  # cudaEventQuery


@check
def unjoined_side_stream_fails_the_capture() -> None:
    accel = getattr(torch, "AcceleratorError", RuntimeError)
    x = torch.ones(4, device="cuda")
    side = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            y = x * 2
            side.wait_stream(torch.cuda.current_stream())  # the side stream joins the capture...
            with torch.cuda.stream(side):
                x.mul_(3)  # ...does work, and the capture's stream never waits for it
    except RuntimeError as e:
        # cudaStreamEndCapture: cudaErrorStreamCaptureUnjoined
        assert isinstance(e, accel) and "CUDA error: capturing stream has unjoined work" in str(e), _chain(e)
        assert e.__context__ is None, _chain(e)
    else:
        raise AssertionError("a capture with unjoined work on a side stream went through")
    del y
    _failed_capture_ran_nothing(g, x, 1.0)
    with torch.cuda.stream(side):  # the failed capture took the side stream out of capture
        x.add_(1)
    side.synchronize()
    assert x.tolist() == [2.0] * 4, x.tolist()
    h = torch.cuda.CUDAGraph()  # and the device captures again, joined properly this time
    with torch.cuda.graph(h):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x.mul_(3)
        torch.cuda.current_stream().wait_stream(side)
    h.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [6.0] * 4, x.tolist()


@check
def pageable_host_copy_in_capture_raises() -> None:
    dev = torch.zeros(4, device="cuda")
    host = torch.ones(4)  # pageable
    msg = _capture_fails(lambda: dev.copy_(host, non_blocking=True))
    # PyTorch's text on CUDA (seen with torch 2.11 on an H200)
    assert "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned" in msg, msg


@check
def capture_usable_after_a_failed_capture() -> None:
    x = torch.ones(3, device="cuda")
    _capture_fails(lambda: x.sum().item())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
    g.replay()
    assert x.tolist() == [2.0] * 3


@check
def pinned_host_copy_is_read_at_replay() -> None:
    dev = torch.zeros(4, device="cuda")
    host = torch.zeros(4).pin_memory()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dev.copy_(host, non_blocking=True)
        out = dev * 2
    for v in (3.0, 7.0):
        host.fill_(v)
        g.replay()
        torch.cuda.synchronize()
        assert out.tolist() == [2 * v] * 4, (v, out.tolist())


@check
def random_numbers_change_every_replay() -> None:
    torch.cuda.manual_seed(0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        r = torch.rand(64, device="cuda")
    g.replay()
    a = r.clone()
    g.replay()
    b = r.clone()
    assert not torch.equal(a, b), "two replays drew the same numbers"
    assert bool(((a >= 0) & (a < 1)).all()) and bool(((b >= 0) & (b < 1)).all())


@check
def graph_memory_counts_until_the_graph_goes() -> None:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    x = torch.ones(1 << 20, device="cuda")  # 4 MiB
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = (x * 2) + 1  # an intermediate and an output of 4 MiB each, from the graph's pool
    assert torch.cuda.memory_reserved() - before >= 3 * (4 << 20)
    g.replay()
    assert y[0].item() == 3.0
    del g, y, x
    torch.cuda.empty_cache()
    assert torch.cuda.memory_allocated() == before


@check
def make_graphed_callables_forward_and_backward() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).cuda()
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).cuda()
    ref.load_state_dict(model.state_dict())
    sample = torch.randn(5, 8, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    for _ in range(3):
        # grads set to None each step, as torch's docs do: the first accumulation may take the graph's
        # static gradient buffer itself as .grad
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        inp = torch.randn(5, 8, device="cuda")
        a = inp.clone().requires_grad_(True)
        b = inp.clone().requires_grad_(True)
        out = graphed(a)
        torch.testing.assert_close(out, ref(b))
        out.pow(2).sum().backward()
        ref(b).pow(2).sum().backward()
        torch.testing.assert_close(a.grad, b.grad)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)


@check
def accelerator_graph() -> None:
    if not hasattr(torch.accelerator, "Graph"):
        return  # torch < 2.12 has no torch.accelerator.Graph
    x = torch.zeros(4, device="cuda")
    s = torch.Stream(device="cuda")
    g = torch.accelerator.Graph()
    with s, g:
        x += 1
    assert x.tolist() == [0.0] * 4
    g.replay()
    g.replay()
    assert x.tolist() == [2.0] * 4


def _other_thread_during_capture(mode: str, work: Callable[[], object]) -> tuple[list, list]:
    """Run work() on another thread (its own, default stream) while this one captures in `mode`:
    (what work() returned, what it raised), the capture's own error, if any, appended to the second."""
    import threading

    go, done = threading.Event(), threading.Event()
    got: list = []
    raised: list = []

    def other() -> None:
        go.wait()
        try:
            got.append(work())
        except BaseException as e:  # noqa: BLE001 - reported to the check
            raised.append(e)
        done.set()

    t = threading.Thread(target=other)
    t.start()
    g = torch.cuda.CUDAGraph()
    x = torch.ones(8, device="cuda")
    try:
        with torch.cuda.graph(g, capture_error_mode=mode):
            x * 2
            go.set()
            assert done.wait(60), "the other thread did not finish"
    except RuntimeError as e:
        raised.append(e)
    t.join(60)
    got.append(g)
    return got, raised


def _adds_run_not_recorded(mode: str) -> None:
    t = torch.zeros(8, device="cuda")

    def work() -> object:
        for _ in range(5):
            t.add_(1)
        return t.cpu().sum().item()  # a blocking copy on the other thread's own stream

    got, raised = _other_thread_during_capture(mode, work)
    assert not raised, [_chain(e) for e in raised]
    during, g = got
    assert during == 40.0, f"the other thread's adds did not run during the capture: {during}"
    assert t.sum().item() == 40.0
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert t.sum().item() == 40.0, f"a replay re-ran the other thread's adds: {t.sum().item()}"


@check
def other_thread_work_runs_during_thread_local_capture() -> None:
    _adds_run_not_recorded("thread_local")


@check
def other_thread_work_runs_during_relaxed_capture() -> None:
    _adds_run_not_recorded("relaxed")


@check
def other_thread_sync_refused_during_global_capture() -> None:
    t = torch.ones(8, device="cuda")
    _, raised = _other_thread_during_capture("global", lambda: t.cpu())
    assert raised, "a blocking copy on another thread ran during a global-mode capture"
    assert any("capturing" in str(e) for e in raised), [_chain(e) for e in raised]
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()  # the device captures again afterwards
    with torch.cuda.graph(g):
        t.add_(1)
    g.replay()
    assert t.tolist() == [2.0] * 8


@check
def side_stream_joined_inside_capture_is_recorded() -> None:
    x = torch.ones(4, device="cuda")
    side = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x.mul_(3)
        torch.cuda.current_stream().wait_stream(side)
    assert x.tolist() == [1.0] * 4, "the side stream's work ran during the capture"
    g.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [3.0] * 4


@check
def operator_error_inside_capture_is_the_operator_error() -> None:
    x = torch.ones(3, device="cuda")
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            x.add_(1)
            x + torch.ones(4, device="cuda")
    except RuntimeError as e:
        assert "must match the size" in str(e), _chain(e)
        accel = getattr(torch, "AcceleratorError", ())
        assert not isinstance(e, accel), f"the shape error came as {_chain(e)}"
    else:
        raise AssertionError("a shape error inside the capture was not raised")
    g.replay()  # the capture ended normally: what came before the error replays
    torch.cuda.synchronize()
    assert x.tolist() == [2.0] * 3, x.tolist()
