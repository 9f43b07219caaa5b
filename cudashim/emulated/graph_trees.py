"""The torch._C hooks Inductor's CUDA graph trees call (torch.compile(mode="reduce-overhead")), over the
emulated device's private pools (csrc/graphs/pools.cpp).

The trees warm a function up with its allocations in the tree's pool, capture it into the same pool,
then replay it, handing the program tensors over the graph's outputs. Between runs they read the
pool's state and set it back, let storages give their memory back to the pool or take it again, and
invalidate the outputs of a replay that a later replay overwrites ("accessing tensor output of
CUDAGraphs that has been overwritten by a subsequent run"). A CPU build of torch has none of these
(or placeholders that raise); the device supplies each with CUDA's meaning, within one difference:
the pool never hands a freed block to a later allocation (pools.cpp), so recordings take more memory
than on a GPU and a checkpoint only has to restore what counts as allocated.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["bind", "pool_users"]

# the users of each (device, pool) that began allocating to it through these hooks or created it as a
# torch.cuda.MemPool (memory.py): what MemPool.use_count() answers
pool_users: dict[tuple[int, tuple[int, int]], int] = {}


class PoolState:
    """_cuda_getCheckpointState's answer: a pool's allocated blocks at one moment."""

    __slots__ = ("device", "pool", "allocated")

    def __init__(self, device: int, pool: tuple[int, int], allocated: list[int]) -> None:
        self.device, self.pool, self.allocated = device, pool, allocated


def _hooks(torch: Any, core: Any) -> dict[str, Any]:
    def begin(device: int, pool: Any) -> None:
        core.pool_begin_thread(device, tuple(pool))
        key = (int(device), tuple(pool))
        pool_users[key] = pool_users.get(key, 0) + 1

    def end(device: int, pool: Any) -> None:
        core.pool_end_thread(device, tuple(pool))

    def release(device: int, pool: Any) -> None:
        core.pool_release(device, tuple(pool))
        key = (int(device), tuple(pool))
        if pool_users.get(key, 0) > 1:
            pool_users[key] -= 1
        else:
            pool_users.pop(key, None)

    def checkpoint(device: int, pool: Any) -> PoolState:
        return PoolState(device, tuple(pool), core.pool_allocated(device, tuple(pool)))

    def set_checkpoint(device: int, state: PoolState, stale_storages: list[int], take_back: list[int]) -> None:
        # storages over blocks the checkpoint does not hold let go of them without freeing twice
        for s in stale_storages:
            core.free_and_remove_deleter(int(s))
        core.pool_set_state(device, state.pool, state.allocated, [int(s) for s in take_back])

    def check_live(device: int, pool: Any, expected: Any) -> bool:
        # the default generator's graph state (two blocks from the first capture's pool) is the
        # generator's, not a storage the trees track: CUDA's trees pass this check with it
        live = set(core.pool_allocated(device, tuple(pool))) - set(core.generator_graph_state(device))
        return live == {int(p) for p in expected}

    def tensor_over(metadata: dict[str, Any], storage: Any) -> Any:
        t = torch.empty(0, dtype=metadata["dtype"], device=storage.device)
        return t.set_(storage, metadata["storage_offset"], metadata["size"], metadata["stride"])

    def data_ptrs_equal(tensors: list[Any], data_ptrs: list[Any], indices: list[int]) -> bool:
        return all(tensors[i].data_ptr() == data_ptrs[i] for i in indices)

    def caching_enabled() -> bool:
        # CUDA's answer: the caching allocator is off under PYTORCH_NO_CUDA_MEMORY_CACHING=1, and
        # Inductor then skips CUDA graphs
        return os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1"

    return {
        "_cuda_cudaCachingAllocator_is_enabled": caching_enabled,
        "_cuda_beginAllocateCurrentThreadToPool": begin,
        "_cuda_endAllocateToPool": end,
        "_cuda_releasePool": release,
        "_cuda_getCheckpointState": checkpoint,
        "_cuda_setCheckpointPoolState": set_checkpoint,
        "_cuda_checkPoolLiveAllocations": check_live,
        "_free_And_Remove_DeleterFn": core.free_and_remove_deleter,
        "_has_Standard_Deleter": core.has_standard_deleter,
        "_set_storage_access_error_msg": core.set_storage_access_error_msg,
        "_set_storage_data_ptr_access_error_msg": core.set_storage_data_ptr_access_error_msg,
        "_construct_CUDA_Tensor_From_Storage_And_Metadata": tensor_over,
        "_tensors_data_ptrs_at_indices_equal": data_ptrs_equal,
        # (the trees' torch._C._cuda_clearCublasWorkspaces is the allocator's, bound by memory.py: the
        # allocator model's cuBLAS workspaces go back, as on CUDA)
        # no cuDNN benchmark cache, no allocation history on the device
        "_cuda_get_conv_benchmark_empty_cache": lambda: True,
        "_cudnn_set_conv_benchmark_empty_cache": lambda enable: None,
        "_cuda_isHistoryEnabled": lambda: False,
    }


def bind(bindings: Any, torch: Any, core: Any) -> None:
    """Bind the hooks into torch._C. A CPU build has some of them as placeholders that raise ("Tried to
    instantiate dummy base class"), a CUDA build has CUDA's own, which ask the caching allocator of a GPU
    the device is not (_torch_compat.cuda_build): both are replaced."""
    memory = getattr(torch.cuda, "memory", None)
    for name, fn in _hooks(torch, core).items():
        bindings.bind(torch._C, name, fn, f"torch._C.{name}", "emulated")
        if memory is not None and hasattr(memory, name):  # use_mem_pool calls the names it imported
            bindings.bind(memory, name, fn, f"torch.cuda.memory.{name}", "emulated")
