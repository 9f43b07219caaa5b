"""CUDA semantics, written as plain CUDA code: each check passes on a real GPU and must pass on the
emulated device. The oracle is CUDA itself: run this file's checks on an NVIDIA machine with no
shim (test_semantics.py does that when torch.cuda is really available).

Each check raises AssertionError (or any error) when the semantics differ. They share one process,
so each leaves the device as it found it (current device, sync-debug mode, default dtype).
"""

from __future__ import annotations

import time
from typing import Callable

import torch

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


@check
def device_to_host_copy_copies() -> None:
    model = torch.nn.Linear(4, 4).cuda()
    best = {k: v.cpu() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(100)
    assert not torch.equal(best["weight"], model.weight.detach().cpu()), "a .cpu() copy followed the device tensor"


@check
def host_to_device_copy_copies() -> None:
    host = torch.ones(3)
    dev = host.cuda()
    also = host.to("cuda")
    host.add_(1)
    assert dev.tolist() == [1.0, 1.0, 1.0] and also.tolist() == [1.0, 1.0, 1.0]


@check
def pinned_staging_buffer_reuse() -> None:
    staging = torch.zeros(4).pin_memory()
    assert staging.is_pinned() and not torch.zeros(4).is_pinned()
    staging.fill_(1)
    first = staging.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    staging.fill_(2)
    second = staging.cuda(non_blocking=True)
    torch.cuda.synchronize()
    assert first.tolist() == [1.0] * 4 and second.tolist() == [2.0] * 4


@check
def cuda_seed_leaves_cpu_stream() -> None:
    torch.manual_seed(0)
    a = torch.rand(5)
    torch.manual_seed(0)
    torch.cuda.manual_seed(1)
    b = torch.rand(5)
    assert torch.equal(a, b), "torch.cuda.manual_seed moved the CPU generator"
    assert not torch.equal(torch.cuda.get_rng_state(), torch.get_rng_state())


@check
def cuda_seed_repeats() -> None:
    torch.cuda.manual_seed(7)
    a = torch.randn(8, device="cuda")
    torch.cuda.manual_seed(7)
    b = torch.randn(8, device="cuda")
    state = torch.cuda.get_rng_state()
    c = torch.rand(3, device="cuda")
    torch.cuda.set_rng_state(state)
    d = torch.rand(3, device="cuda")
    assert torch.equal(a, b) and torch.equal(c, d) and a.device.type == "cuda"


@check
def dropout_draws_from_the_device() -> None:
    # F.dropout takes the fused native_dropout for any GPU tensor: its mask must come from the
    # device's generator (seeded by torch.cuda.manual_seed), never the CPU's
    x = torch.ones(64, device="cuda")
    cpu = torch.get_rng_state()
    masks = []
    for _ in range(2):
        torch.cuda.manual_seed(3)
        masks.append(torch.nn.functional.dropout(x, 0.5).cpu())
    assert torch.equal(masks[0], masks[1]), "torch.cuda.manual_seed does not fix dropout's mask"
    assert torch.equal(torch.get_rng_state(), cpu), "dropout on cuda drew from the CPU generator"
    assert set(masks[0].tolist()) == {0.0, 2.0}


@check
def memory_allocated_is_exact() -> None:
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    nbytes = 100 * 2**20
    x = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    assert torch.cuda.memory_allocated() - before == nbytes
    assert torch.cuda.max_memory_allocated() >= before + nbytes
    assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()
    assert torch.cuda.memory_stats()["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
    del x
    assert torch.cuda.memory_allocated() == before


@check
def freed_memory_stays_reserved() -> None:
    # CUDA's caching allocator keeps freed blocks reserved and hands them to the next allocation of
    # their size (a factory's, or a copy's made with empty_like) until empty_cache() gives them back;
    # the installer and the first device reported the process's (or the live) memory instead
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    r0 = torch.cuda.memory_reserved()
    nbytes = 64 * 2**20
    x = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    r1 = torch.cuda.memory_reserved()
    assert r1 - r0 >= nbytes, (r0, r1)
    del x
    assert torch.cuda.memory_reserved() == r1, "a freed block left the reserved memory"
    y = torch.zeros(nbytes // 4, dtype=torch.float32, device="cuda")  # takes x's block back
    assert torch.cuda.memory_reserved() == r1, "the same size asked the host again"
    z = y.clone()
    del y
    w = z.clone()  # takes y's block back
    assert torch.cuda.memory_reserved() - r1 <= nbytes, (r1, torch.cuda.memory_reserved())
    assert torch.cuda.memory_stats()["reserved_bytes.all.current"] == torch.cuda.memory_reserved()
    assert float(w[0]) == 0.0
    del z, w
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == r0, (r0, torch.cuda.memory_reserved())


@check
def accelerator_is_cuda() -> None:
    assert torch.accelerator.is_available()
    acc = torch.accelerator.current_accelerator()
    assert acc is not None and acc.type == "cuda"
    assert torch.accelerator.device_count() == torch.cuda.device_count() >= 1
    assert torch.accelerator.current_device_index() == torch.cuda.current_device()


@check
def is_cuda_and_device_agree() -> None:
    host = torch.ones(2)
    assert not host.is_cuda and host.device.type == "cpu" and host.device.index is None
    dev = host.cuda()
    assert dev.is_cuda and dev.device == torch.device("cuda", 0) and dev.device.index == 0
    assert dev.get_device() == 0 and host.get_device() == -1
    assert torch.zeros(2, device="cuda").device == torch.device("cuda", torch.cuda.current_device())


@check
def device_index_out_of_range_raises() -> None:
    n = torch.cuda.device_count()
    for make in (lambda: torch.empty(1, device=f"cuda:{n}"), lambda: torch.ones(1).to(f"cuda:{n}"),
                 lambda: torch.cuda.set_device(n)):
        try:
            make()
        except RuntimeError as e:  # CUDA: "invalid device ordinal"
            assert "invalid device ordinal" in str(e), e
        else:
            raise AssertionError(f"cuda:{n} accepted with {n} device(s)")


@check
def device_index_overflow_raises() -> None:
    """An index past c10::DeviceIndex (8 bits) is refused, never narrowed to another device (257 -> 1)
    or to "the current device" (130 -> -126): set_device with CUDA's ordinal error (what cudaSetDevice
    answers on a GPU), the memory functions as PyTorch's bindings refuse the index."""
    before = torch.cuda.current_device()
    try:
        torch.cuda.set_device(257)
    except RuntimeError as e:
        assert "invalid device ordinal" in str(e), ("set_device(257)", e)
    else:
        raise AssertionError("set_device(257) was accepted")
    for name, call in (("memory_allocated(130)", lambda: torch.cuda.memory_allocated(130)),
                       ("memory_stats(300)", lambda: torch.cuda.memory_stats(300))):
        try:
            call()
        except RuntimeError as e:
            assert "Overflow when unpacking DeviceIndex" in str(e), (name, e)
        else:
            raise AssertionError(f"{name} was accepted")
    assert torch.cuda.current_device() == before
    n = torch.cuda.device_count()
    try:  # in range for the type, past the devices: CUDA's allocator refuses it too
        torch.cuda.memory_allocated(n)
    except RuntimeError:
        pass
    else:
        raise AssertionError(f"memory_allocated({n}) answered with {n} device(s)")


@check
def cross_device_op_raises() -> None:
    try:
        torch.ones(3, device="cuda") + torch.ones(3)
    except RuntimeError as e:
        assert "same device" in str(e), e
    else:
        raise AssertionError("a cuda + cpu op ran")
    assert (torch.ones(3, device="cuda") + torch.tensor(1.0)).device.type == "cuda"  # a CPU scalar is allowed


@check
def sync_debug_mode_raises() -> None:
    x = torch.ones(4, device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        try:
            x.sum().item()
        except RuntimeError as e:
            assert "synchroniz" in str(e), e
        else:
            raise AssertionError("item() did not raise under sync debug mode 'error'")
        x * 2  # an asynchronous op still runs
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.cuda.get_sync_debug_mode() == 0


@check
def sync_debug_flags_data_dependent_ops() -> None:
    # operators whose output size depends on the data read it back to the host: CUDA synchronizes
    x = torch.tensor([1.0, 0.0, 2.0, 2.0], device="cuda")
    mask = x > 0
    reps = torch.tensor([1, 2, 0, 1], device="cuda")
    idx = torch.tensor([0, 2], device="cuda")
    syncing = {
        "torch.nonzero": lambda: torch.nonzero(x),
        "torch.masked_select": lambda: torch.masked_select(x, mask),
        "Tensor.item": lambda: x[0].item(),
        "torch.unique": lambda: torch.unique(x),
        "boolean-mask indexing": lambda: x[mask],
        "torch.repeat_interleave without output_size": lambda: torch.repeat_interleave(x, reps),
    }
    quiet = {  # the same families where nothing is read back
        "integer indexing": lambda: x[idx],
        "torch.repeat_interleave with output_size": lambda: torch.repeat_interleave(x, reps, output_size=4),
        "torch.where": lambda: torch.where(mask, x, 0.0),
    }
    missed, raised = [], []
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for name, fn in syncing.items():
            try:
                fn()
                missed.append(name)
            except RuntimeError as e:
                assert "synchroniz" in str(e), f"{name}: {e}"
        for name, fn in quiet.items():
            try:
                fn()
            except RuntimeError as e:
                raised.append(f"{name}: {e}")
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert not missed, f"did not raise under sync debug mode 'error': {missed}"
    assert not raised, f"raised under sync debug mode 'error': {raised}"


@check
def sync_debug_operators_as_measured_on_cuda() -> None:
    # every operator CUDA was measured to synchronize on (verification/sync_debug_cuda.py over PyTorch's
    # operator database on a GPU) raises under sync debug mode "error" on the same OpInfos' samples,
    # and no operator outside the measured list does
    import json
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    harness = repo / "verification"
    sys.path.insert(0, str(harness))
    try:
        from sync_debug_cuda import OWN, TABLE, measure
    finally:
        sys.path.remove(str(harness))
    measured = json.loads((repo / "benchmarks" / "results" / "sync_debug_cuda.json").read_text())["ops"]
    # the oracle is the measurement, not the device's table: operators that synchronized on every call
    enforced = {n for n, r in measured.items() if r["ran"] and r["synchronized"] == r["ran"] and n not in OWN}
    # allowed to synchronize: what did on some calls, the device's own copies, and indexing with a mask
    # (CUDA synchronizes in its nonzero, which the device runs inside the CPU's indexing kernel)
    masks = {n for n, when in json.loads(TABLE.read_text())["ops"].items() if when.startswith(("bool:", "put:"))}
    known = {n for n, r in measured.items() if r["synchronized"]} | OWN | masks
    opinfos = sorted({by for n in enforced for by in measured[n]["by"]})
    got = measure(opinfos, samples=4, dtypes=[])["ops"]  # as measured
    quiet = [f"{n} ({r['ran'] - r['synchronized']} of {r['ran']})" for n, r in got.items()
             if n in enforced and r["synchronized"] != r["ran"]]
    loud = [f"{n} ({r['synchronized']} of {r['ran']})" for n, r in got.items() if r["synchronized"] and n not in known]
    unseen = sorted(enforced - set(got))
    assert not quiet, f"did not synchronize where CUDA does: {quiet}"
    assert not loud, f"synchronized where CUDA does not: {loud}"
    assert not unseen, f"the OpInfos that reached these operators on CUDA did not reach them here: {unseen}"


@check
def jit_script_factory() -> None:
    @torch.jit.script
    def make(n: int) -> torch.Tensor:
        return torch.zeros(n, device="cuda") + torch.ones(n, device="cuda")

    out = make(3)
    assert out.is_cuda and out.tolist() == [1.0, 1.0, 1.0]


@check
def compile_under_autocast() -> None:
    torch._dynamo.reset()

    @torch.compile
    def step(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a @ b).relu()

    a = torch.randn(16, 16, device="cuda")
    b = torch.randn(16, 16, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = step(a, b)
        assert torch.is_autocast_enabled("cuda")
    assert out.dtype == torch.bfloat16 and out.is_cuda
    want = (a.bfloat16() @ b.bfloat16()).relu()
    assert torch.allclose(out.float(), want.float(), atol=0.1, rtol=0.05)


@check
def compile_low_precision_norm() -> None:
    # nano-vllm's RMSNorm (bf16 default dtype, compiled methods), then a linear: Inductor's kernels
    # must store bf16 as bf16 (the emulated device once stored float vectors into bf16 buffers)
    torch._dynamo.reset()

    class RMSNorm(torch.nn.Module):
        def __init__(self, hidden: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)

        def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            orig_dtype = x.dtype
            x = x.float().add_(residual.float())
            residual = x.to(orig_dtype)
            x.mul_(torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6))
            return x.to(orig_dtype).mul_(self.weight), residual

    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        torch.manual_seed(0)
        norm, lin = RMSNorm(64).cuda(), torch.nn.Linear(64, 96, bias=False).cuda()
        compiled = torch.compile(norm.forward)
        x, r = torch.randn(7, 64).cuda(), torch.randn(7, 64).cuda()
        with torch.inference_mode():
            for _ in range(3):
                got, got_res = compiled(x, r)
                want, want_res = norm(x, r)
                assert got.dtype == got_res.dtype == torch.bfloat16 and got.is_cuda
                assert torch.equal(got_res, want_res)
                torch.testing.assert_close(got, want, atol=0.02, rtol=0.02)
                torch.testing.assert_close(lin(got), lin(want), atol=0.25, rtol=0.05)
    finally:
        torch.set_default_dtype(saved)


@check
def autocast_follows_cuda_rules() -> None:
    a = torch.randn(8, 8, device="cuda")
    with torch.autocast("cuda"):  # CUDA's default autocast dtype is float16
        mm = a @ a
        soft = torch.softmax(mm, dim=-1)  # a float32 op under CUDA's rules
    assert torch.get_autocast_dtype("cuda") == torch.float16
    assert mm.dtype == torch.float16 and soft.dtype == torch.float32


@check
def backward_on_device() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).cuda()
    loss = model(torch.randn(4, 8, device="cuda")).sum()
    loss.backward()
    assert all(p.grad is not None and p.grad.is_cuda for p in model.parameters())


@check
def events_time_real_work() -> None:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 15.0
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ones(2, device="cuda") * 3
    torch.cuda.current_stream().wait_stream(s)
    assert s.device.type == "cuda" and y.tolist() == [3.0, 3.0]


@check
def views_alias_device_memory() -> None:
    x = torch.zeros(4, 4, device="cuda")
    x.view(16)[3] = 1
    x.t()[0, 2] = 2
    x[1:, :2].unfold(0, 2, 1).fill_(0)  # noqa: a view of a view
    x.as_strided((2,), (5,))[1] = 5
    assert x[0, 3].item() == 1 and x[2, 0].item() == 0 and x[1, 1].item() == 5
    assert x.view(16).untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


@check
def out_argument_resized_in_place() -> None:
    out = torch.empty(0, device="cuda")
    res = torch.add(torch.ones(3, device="cuda"), 1, out=out)
    assert res is out and out.shape == (3,) and out.is_cuda and out.tolist() == [2.0, 2.0, 2.0]


@check
def attention_forward_backward() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 32) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    dq, dk, dv = (t.cuda().requires_grad_() for t in (q, k, v))
    got = torch.nn.functional.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    got.sum().backward()
    assert got.is_cuda and torch.allclose(got.detach().cpu(), want, atol=1e-4)
    assert dq.grad is not None and dq.grad.is_cuda and dv.grad.shape == v.shape


def _seed_and_offset(state: torch.Tensor) -> tuple[int, int]:
    """CUDA's generator state: 16 bytes, the Philox seed then the offset (CUDAGeneratorImpl::get_state)."""
    assert state.dtype == torch.uint8 and state.numel() == 16, (state.dtype, state.numel())
    return int(state[:8].view(torch.int64).item()), int(state[8:].view(torch.int64).item())


@check
def generator_state_is_philox() -> None:
    saved = torch.cuda.get_rng_state()
    try:
        torch.cuda.manual_seed(123)
        assert _seed_and_offset(torch.cuda.get_rng_state()) == (123, 0)
        torch.rand(1000, device="cuda")  # one round of the grid: 4 Philox values per thread
        assert _seed_and_offset(torch.cuda.get_rng_state()) == (123, 4)
        torch.randn(1000, device="cuda")
        state = torch.cuda.get_rng_state()
        assert _seed_and_offset(state) == (123, 8)
        a = torch.rand(50, device="cuda")
        torch.cuda.set_rng_state(state)  # the same (seed, offset): the same values
        assert torch.equal(torch.rand(50, device="cuda"), a)
        g = torch.cuda.default_generators[torch.cuda.current_device()]
        assert g.initial_seed() == 123 and g.get_offset() == 12
        g.set_offset(8)
        assert torch.equal(torch.rand(50, device="cuda"), a)
        raised = False
        try:
            g.set_offset(6)
        except RuntimeError as e:
            raised = "offset must be a multiple of 4" in str(e)
        assert raised, "set_offset(6) was accepted"
        raised = False
        try:
            torch.cuda.set_rng_state(torch.zeros(5, dtype=torch.uint8))
        except RuntimeError as e:
            raised = "RNG state is wrong size" in str(e)
        assert raised, "a 5-byte state was accepted"
    finally:
        torch.cuda.set_rng_state(saved)


@check
def generators_are_on_their_device() -> None:
    assert torch.cuda.default_generators[0].device == torch.device("cuda", 0)
    gen = torch.Generator(device="cuda")
    assert gen.device.type == "cuda" and gen.get_state().numel() == 16
    gen.manual_seed(5)
    before = torch.cuda.get_rng_state()
    x = torch.rand(10, device="cuda", generator=gen)
    assert x.is_cuda and gen.get_offset() == 4
    assert torch.equal(torch.cuda.get_rng_state(), before), "a given generator moved the default one"
    raised = ""
    try:
        torch.rand(3, device="cuda", generator=torch.Generator())
    except RuntimeError as e:
        raised = str(e)
    assert "Expected a 'cuda' device type for generator but found 'cpu'" in raised, raised
    try:  # the reverse: a cuda generator dispatches the operator to the device, where the tensor is not
        torch.rand(3, generator=gen)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a cuda generator filled a CPU tensor")


@check
def graphsafe_generator_state() -> None:
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    shared = g.graphsafe_get_state()  # a generator over the same state
    torch.rand(10, device="cuda", generator=g)
    assert shared.get_offset() == 4 and shared.initial_seed() == 7
    copy = g.clone_state()  # a generator over a copy of the state
    torch.rand(10, device="cuda", generator=g)
    assert copy.get_offset() == 4 and g.get_offset() == 8
    g.graphsafe_set_state(copy)  # g now draws from copy's state
    a = torch.rand(10, device="cuda", generator=g)
    assert copy.get_offset() == 8 and shared.get_offset() == 8
    shared.set_offset(4)  # the state g started from: the same values g just drew
    assert torch.equal(torch.rand(10, device="cuda", generator=shared), a)
