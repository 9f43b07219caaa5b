"""CUDA's memory semantics, written as plain CUDA code: out of memory, the memory fraction, the
allocator APIs, and the statistics of PyTorch's caching allocator (CUDACachingAllocator.cpp).

Run by test_memory.py through _runner.py: on a real GPU with no shim (CUDA is the oracle), on the
emulated device without a profile (COMMON) and under a device profile (all of them: the caching
allocator's statistics are modelled while a profile is active). Each check starts and ends with
nothing allocated on the device, and says so when it finds otherwise.
"""

from __future__ import annotations

from typing import Callable

import torch

CHECKS: dict[str, Callable[[], None]] = {}
MiB = 2**20
# CUDAGeneratorState::register_graph: the first graph the default generator serves allocates its seed and
# offset for graphs, two one-element int64 tensors (512 bytes each), first thing in capture_begin: from the
# default pool, on the capture's stream (a segment of that stream's); they are freed when the last such
# graph goes
GRAPH_RNG_STATE = 2 * 512


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def fmt(n: int) -> str:
    """c10's format_size, as CUDA's messages print sizes."""
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1048576:
        return f"{n / 1024:.2f} KiB"
    if n <= 1073741824:
        return f"{n / 1048576:.2f} MiB"
    return f"{n / 1073741824:.2f} GiB"


def clean() -> None:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    assert torch.cuda.memory_allocated() == 0, f"{torch.cuda.memory_allocated()} bytes left allocated by an earlier check"
    assert torch.cuda.memory_reserved() == 0, f"{torch.cuda.memory_reserved()} bytes left reserved after empty_cache()"


def u8(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8, device="cuda")


def stat(name: str) -> int:
    return int(torch.cuda.memory_stats()[name])


# -- everywhere ---------------------------------------------------------------------------------------

@check
def oom_is_cuda_out_of_memory() -> None:
    clean()
    total = torch.cuda.get_device_properties(0).total_memory
    n = (2 * total // (2 * MiB)) * (2 * MiB)  # a multiple of the 2 MiB CUDA rounds large requests to
    before = stat("num_ooms")
    try:
        u8(n)
    except torch.cuda.OutOfMemoryError as e:
        msg = str(e)
        assert isinstance(e, torch.OutOfMemoryError) and isinstance(e, RuntimeError)
    else:
        raise AssertionError(f"allocating {fmt(n)} on a device of {fmt(total)} did not raise")
    want = f"CUDA out of memory. Tried to allocate {fmt(n)}. GPU 0 has a total capacity of {fmt(total)} of which "
    assert msg.startswith(want), msg[:400]
    assert "is allocated by PyTorch" in msg and "is reserved by PyTorch but unallocated" in msg, msg
    assert stat("num_ooms") == before + 1, (before, stat("num_ooms"))
    clean()


@check
def memory_fraction_is_enforced() -> None:
    clean()
    total = torch.cuda.get_device_properties(0).total_memory
    assert torch.cuda.get_per_process_memory_fraction() == 1.0
    torch.cuda.set_per_process_memory_fraction(0.5)
    try:
        assert abs(torch.cuda.get_per_process_memory_fraction() - 0.5) < 1e-6
        x = u8(4 * MiB)  # below the cap: fine
        del x
        try:
            u8(int(total * 0.6))
        except torch.cuda.OutOfMemoryError as e:
            assert f"{fmt(int(0.5 * total))} allowed; " in str(e), str(e)[:500]
        else:
            raise AssertionError("an allocation past the memory fraction did not raise")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert torch.cuda.get_per_process_memory_fraction() == 1.0
    try:
        torch.cuda.set_per_process_memory_fraction(1.5)
    except ValueError as e:
        assert "Invalid fraction value" in str(e), e
    else:
        raise AssertionError("a fraction above 1 was accepted")
    clean()


@check
def caching_allocator_alloc_counts() -> None:
    clean()
    ptr = torch.cuda.caching_allocator_alloc(3 * MiB)
    try:
        assert isinstance(ptr, int) and ptr != 0
        assert torch.cuda.memory_allocated() == 3 * MiB, torch.cuda.memory_allocated()
    finally:
        torch.cuda.caching_allocator_delete(ptr)
    assert torch.cuda.memory_allocated() == 0
    clean()


@check
def host_memory_stats_count_pinned() -> None:
    torch.cuda.init()
    before = torch.cuda.host_memory_stats().get("active_requests.current", 0)
    x = torch.empty(1000).pin_memory()  # 4000 bytes: a 4096-byte block of the pinned cache
    s = torch.cuda.host_memory_stats()
    assert s["active_requests.current"] == before + 1, s
    assert s["allocated_bytes.current"] >= 4096 and s["active_bytes.current"] >= 4096, s
    assert "num_host_alloc" in s and "allocations.peak" in s, sorted(s)
    del x


@check
def snapshot_apis_answer() -> None:
    clean()
    snap = torch.cuda.memory._snapshot()
    assert isinstance(snap["segments"], list) and isinstance(snap["device_traces"], list), sorted(snap)
    assert isinstance(torch.cuda.memory_snapshot(), list)
    torch.cuda.memory._record_memory_history(enabled=None)  # switching it off is always possible


@check
def mem_get_info_free_drops_by_what_is_reserved() -> None:
    # cudaMalloc takes the memory at once: free drops by what the allocator reserved, before any of it
    # is written, and stays where it is when the memory is written; what free says can be had
    clean()
    free0, total = torch.cuda.mem_get_info()
    n = min(10 * 2**30, free0 // 2) // (2 * MiB) * (2 * MiB)
    slack = n // 20  # other processes of the machine move free memory meanwhile
    x = u8(n)
    reserved = torch.cuda.memory_reserved()
    assert reserved >= n, (reserved, n)
    free1, total1 = torch.cuda.mem_get_info()
    assert total1 == total and abs((free0 - free1) - reserved) <= slack, (
        f"reserving {fmt(reserved)} moved free from {fmt(free0)} to {fmt(free1)}")
    x[: 256 * MiB].fill_(1)  # written memory is still counted once
    free2, _ = torch.cuda.mem_get_info()
    assert abs(free2 - free1) <= slack, (f"writing 256 MiB of a reserved block moved free from {fmt(free1)} "
                                          f"to {fmt(free2)}")
    m = (free2 - 512 * MiB) // (2 * MiB) * (2 * MiB)
    y = u8(m)  # what free said is granted
    free3, _ = torch.cuda.mem_get_info()
    assert free3 <= 512 * MiB + slack, (f"after taking {fmt(m)} of the {fmt(free2)} free, {fmt(free3)} is still "
                                        "said to be free")
    del x, y
    clean()


@check
def operator_output_past_the_device_is_out_of_memory() -> None:
    # an operator's output comes from the caching allocator like any other block: too large for the
    # device, it raises CUDA's out of memory, which back-off code catches
    clean()
    total = torch.cuda.get_device_properties(0).total_memory
    before = stat("num_ooms")
    try:
        torch.ones(1, device="cuda").expand(2 * total) + 1
    except torch.cuda.OutOfMemoryError as e:
        msg = str(e)
    else:
        raise AssertionError(f"an output of {fmt(8 * total)} on a device of {fmt(total)} did not raise")
    n = (8 * total + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
    want = f"CUDA out of memory. Tried to allocate {fmt(n)}. GPU 0 has a total capacity of {fmt(total)} of which "
    assert msg.startswith(want), msg[:400]
    assert stat("num_ooms") == before + 1, (before, stat("num_ooms"))
    clean()


@check
def mem_get_info_refuses_an_invalid_ordinal() -> None:
    # as every other per-device call: an index past the devices, and one past c10::DeviceIndex
    n = torch.cuda.device_count()
    for index in (n, 256):
        try:
            torch.cuda.mem_get_info(index)
        except (RuntimeError, TypeError):
            pass
        else:
            raise AssertionError(f"mem_get_info({index}) answered with {n} device(s)")


COMMON = list(CHECKS)


# -- the caching allocator's statistics (under a profile on the emulated device) -------------------------

@check
def small_request_takes_a_2mib_segment() -> None:
    clean()
    x = u8(1000)
    assert torch.cuda.memory_allocated() == 1024, torch.cuda.memory_allocated()  # rounded to 512 bytes
    assert torch.cuda.memory_reserved() == 2 * MiB, torch.cuda.memory_reserved()
    assert stat("segment.small_pool.current") == 1 and stat("segment.large_pool.current") == 0
    assert stat("allocated_bytes.small_pool.current") == 1024
    y = u8(1000)  # split from the same segment
    assert torch.cuda.memory_reserved() == 2 * MiB and torch.cuda.memory_allocated() == 2048
    del x, y
    clean()


@check
def mid_request_takes_a_20mib_segment_and_splits() -> None:
    clean()
    x = u8(5 * MiB)
    assert torch.cuda.memory_reserved() == 20 * MiB and torch.cuda.memory_allocated() == 5 * MiB
    y = u8(5 * MiB)  # the 15 MiB left over
    assert torch.cuda.memory_reserved() == 20 * MiB and torch.cuda.memory_allocated() == 10 * MiB
    assert stat("inactive_split.large_pool.current") == 1 and stat("inactive_split_bytes.all.current") == 10 * MiB
    z = u8(12 * MiB)  # 10 MiB or more: a segment of its own size, rounded to 2 MiB
    assert torch.cuda.memory_reserved() == 32 * MiB, torch.cuda.memory_reserved()
    assert stat("segment.all.current") == 2 and stat("num_device_alloc") >= 2
    del x, y, z
    clean()


@check
def unsplit_remainder_is_allocated() -> None:
    clean()
    x = u8(19 * MiB + MiB // 2)  # 0.5 MiB left in its 20 MiB segment: not worth a split
    assert torch.cuda.memory_allocated() == 20 * MiB, torch.cuda.memory_allocated()
    assert stat("requested_bytes.all.current") == 19 * MiB + MiB // 2
    del x
    clean()


@check
def freed_neighbours_merge() -> None:
    clean()
    x, y = u8(5 * MiB), u8(5 * MiB)
    del x, y
    assert torch.cuda.memory_allocated() == 0 and torch.cuda.memory_reserved() == 20 * MiB
    assert stat("inactive_split.all.current") == 0  # merged back into one whole block
    z = u8(15 * MiB)  # fits the merged block: no new segment
    assert torch.cuda.memory_reserved() == 20 * MiB and stat("segment.all.current") == 1
    del z
    clean()


@check
def empty_cache_returns_whole_segments() -> None:
    clean()
    a, b = u8(5 * MiB), u8(30 * MiB)
    freed = stat("num_device_free")
    del b
    torch.cuda.empty_cache()  # b's segment is whole and free: returned; a's stays
    assert torch.cuda.memory_reserved() == 20 * MiB and stat("num_device_free") == freed + 1
    assert torch.cuda.max_memory_reserved() >= 50 * MiB
    del a
    clean()


@check
def snapshot_lists_segments_and_blocks() -> None:
    clean()
    x = u8(5 * MiB)
    segs = [s for s in torch.cuda.memory_snapshot()
            if any(b["state"] == "active_allocated" and b["size"] == 5 * MiB for b in s["blocks"])]
    assert len(segs) == 1, segs
    seg = segs[0]
    assert seg["total_size"] == 20 * MiB and seg["allocated_size"] == 5 * MiB and seg["segment_type"] == "large", seg
    assert [b["state"] for b in seg["blocks"]] == ["active_allocated", "inactive"], seg["blocks"]
    assert seg["address"] in {s["address"] for s in torch.cuda.memory._snapshot()["segments"]}
    del x
    clean()


@check
def mem_get_info_counts_reserved() -> None:
    clean()
    free0, total = torch.cuda.mem_get_info()
    assert total == torch.cuda.get_device_properties(0).total_memory, (total, torch.cuda.get_device_properties(0))
    x = u8(100 * MiB)
    free1, _ = torch.cuda.mem_get_info()
    assert 100 * MiB <= free0 - free1 <= 102 * MiB, (free0, free1)
    del x
    clean()


@check
def graph_capture_allocates_from_its_private_pool() -> None:
    # CUDACachingAllocator: a capture's requests are served from the graph's private pool (segments of
    # their own, reserved while a graph uses the pool); a block the program frees goes back to that pool
    clean()
    x = torch.ones(256 * 1024, device="cuda")  # 1 MiB: a small-pool block, in a 2 MiB segment
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # the generator's graph state first: a segment of the capture stream's
        y = x * 2  # the pool's segment (x's has 1 MiB free, but it is the default pool's)
        z = y + 1  # the rest of that segment
        del y      # back to the graph's pool
    assert torch.cuda.memory_allocated() == 2 * MiB + GRAPH_RNG_STATE, torch.cuda.memory_allocated()
    assert torch.cuda.memory_reserved() == 6 * MiB, torch.cuda.memory_reserved()
    g.replay()
    assert torch.cuda.memory_allocated() == 2 * MiB + GRAPH_RNG_STATE, "a replay allocated"
    del z
    torch.cuda.empty_cache()  # the pool is the graph's while it lives: nothing goes back
    assert (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) == (MiB + GRAPH_RNG_STATE, 6 * MiB), (
        torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
    del g  # releasePool: its free segments go back at the next empty_cache(); the generator's state goes
    torch.cuda.empty_cache()
    assert (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) == (MiB, 2 * MiB), (
        torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
    del x
    clean()


@check
def graph_capture_reuses_a_block_freed_during_it() -> None:
    # a block the program frees during the capture goes back to the graph's pool at once and serves
    # the capture's next request of its size (the graph keeps the memory for its replays all the same)
    clean()
    x = torch.ones(256 * 1024, device="cuda")  # 1 MiB, in the default pool's 2 MiB segment
    first = torch.cuda.CUDAGraph()
    with torch.cuda.graph(first):  # an empty graph: the generator's graph state, in a segment of its stream's
        pass
    assert torch.cuda.memory_reserved() == 4 * MiB, torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2  # the pool's first segment
        del y      # back to the graph's pool
        z = x + 1  # y's block
        w = x + 3  # the rest of that segment: no second one
    assert torch.cuda.memory_reserved() == 6 * MiB, torch.cuda.memory_reserved()
    g.replay()
    assert float(z[0]) == 2.0 and float(w[0]) == 4.0, (float(z[0]), float(w[0]))
    del g, z, w
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 4 * MiB, torch.cuda.memory_reserved()
    del first
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 2 * MiB, torch.cuda.memory_reserved()
    del x
    clean()


@check
def thread_allocating_to_a_pool_takes_its_segments() -> None:
    # beginAllocateCurrentThreadToPool (Inductor's CUDA graph trees warm up this way): the thread's
    # requests are served from the pool's own segments until endAllocateToPool; releasePool lets the
    # pool's free segments go at the next empty_cache()
    clean()
    device = torch.cuda.current_device()
    x = torch.ones(256 * 1024, device="cuda")  # 1 MiB, in the default pool's 2 MiB segment
    pool = torch.cuda.graph_pool_handle()
    torch._C._cuda_beginAllocateCurrentThreadToPool(device, pool)
    try:
        y = torch.ones(256 * 1024, device="cuda")  # the pool's segment, not the free half of x's
    finally:
        torch._C._cuda_endAllocateToPool(device, pool)
    assert torch.cuda.memory_reserved() == 4 * MiB, torch.cuda.memory_reserved()
    del y
    torch.cuda.empty_cache()  # the pool still has its user: nothing goes back
    assert (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) == (MiB, 4 * MiB), (
        torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
    torch._C._cuda_releasePool(device, pool)
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 2 * MiB, torch.cuda.memory_reserved()
    del x
    clean()


@check
def streams_keep_their_own_blocks() -> None:
    # CUDACachingAllocator: a block serves requests of the stream it was allocated on (BlockComparator
    # orders by stream first), so another stream's request takes a segment of its own
    clean()
    x = u8(1000)  # the default stream's 2 MiB segment
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = u8(1000)  # s's own segment, though x's has room
    assert torch.cuda.memory_reserved() == 4 * MiB, torch.cuda.memory_reserved()
    z = u8(1000)  # the default stream's again: x's segment
    assert torch.cuda.memory_reserved() == 4 * MiB, torch.cuda.memory_reserved()
    torch.cuda.synchronize()
    del x, y, z
    clean()


@check
def graph_generator_state_is_the_default_pools() -> None:
    # the default generator's graph state is allocated before the capture allocates to its pool: the
    # default pool's, on the capture's stream; what the capture allocates is the graph pool's
    clean()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.ones(1000, device="cuda")  # 4000 bytes: 4096 of the pool's
    segments = sorted((tuple(seg.get("segment_pool_id") or (0, 0)) != (0, 0), seg["allocated_size"])
                      for seg in torch.cuda.memory_snapshot())
    assert segments == [(False, GRAPH_RNG_STATE), (True, 4096)], segments
    del g, y
    clean()


# Last: cuBLAS's workspaces stay allocated for the process, as PyTorch keeps them.
@check
def cublas_workspace_on_first_matmul_per_stream() -> None:
    # CublasHandlePool.cpp: the first BLAS call of a thread's handle on a stream allocates the handle's
    # workspace through the caching allocator, after the call's output: 32 MiB on compute capability
    # 9.0, else 8 MiB + 128 KiB (CUBLAS_WORKSPACE_CONFIG unset); cuBLASLt (addmm with a fusable bias)
    # takes a workspace of its own, 1 MiB (CUBLASLT_WORKSPACE_SIZE unset).
    clean()
    ws = 32 * MiB if torch.cuda.get_device_capability() == (9, 0) else 8 * MiB + 128 * 1024
    a = torch.ones(64, 64, device="cuda")  # 16 KiB
    base = torch.cuda.memory_allocated()
    outs = [a @ a]
    assert torch.cuda.memory_allocated() - base == 16384 + ws, torch.cuda.memory_allocated() - base
    outs.append(a @ a)  # the same handle and stream: its workspace already
    assert torch.cuda.memory_allocated() - base == 2 * 16384 + ws, torch.cuda.memory_allocated() - base
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        outs.append(a @ a)  # another stream: another workspace
    torch.cuda.current_stream().wait_stream(side)
    assert torch.cuda.memory_allocated() - base == 3 * 16384 + 2 * ws, torch.cuda.memory_allocated() - base
    bias = torch.ones(64, device="cuda")  # 512 bytes (rounded)
    outs.append(torch.addmm(bias, a, a))  # through cuBLASLt: its workspace too
    assert torch.cuda.memory_allocated() - base == 4 * 16384 + 512 + 2 * ws + MiB, torch.cuda.memory_allocated() - base
    outs.append(torch.addmm(bias, a, a))
    assert torch.cuda.memory_allocated() - base == 5 * 16384 + 512 + 2 * ws + MiB, torch.cuda.memory_allocated() - base
    torch._C._cuda_clearCublasWorkspaces()  # at::cuda::clearCublasWorkspaces: every one goes back
    assert torch.cuda.memory_allocated() - base == 5 * 16384 + 512, torch.cuda.memory_allocated() - base
    outs.append(a @ a)  # and the next product takes one again
    assert torch.cuda.memory_allocated() - base == 6 * 16384 + 512 + ws, torch.cuda.memory_allocated() - base
