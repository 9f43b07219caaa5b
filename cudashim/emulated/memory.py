"""torch.cuda's memory statistics, read from the emulated device's allocator (csrc/runtime/allocator.cpp).

The allocator rounds every block to 512 bytes as CUDA's caching allocator does, so "allocated" moves
by exactly what the program allocates; like CUDA's, it keeps freed blocks over 128 KiB for the next
allocation of about their size: they stay "reserved" until empty_cache() gives them back (or never,
with PYTORCH_NO_CUDA_MEMORY_CACHING=1); smaller blocks go back to the host's malloc. Blocks are not split, so one pool ("large_pool") holds them all.
mem_get_info() is the host's total, and as free what the device will still grant: the host's available
memory less what the device holds and the host has not yet given pages for (a reservation counts at
once, as cudaMalloc's does), never more than the device's memory less what it holds.

With a device profile the statistics are those of the core's model of CUDA's caching allocator
(csrc/runtime/cache_model.cpp: both pools, splitting, segments in memory_snapshot()), and mem_get_info() is
the profile's memory less what the device reserves. Either way a request past the device's memory
(or the share set_per_process_memory_fraction allows) raises torch.OutOfMemoryError with CUDA's
message, counted in num_ooms.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Callable, Mapping

from .. import _torch_compat

__all__ = ["MemoryTable", "bind_storage_resize", "bind_allocator_apis", "configure"]

_POOLS = ("all", "large_pool", "small_pool")


def _stat(current: int, peak: int, allocated: int, freed: int) -> dict[str, int]:
    return {"current": current, "peak": peak, "allocated": allocated, "freed": freed}


class MemoryTable:
    """The memory functions of torch.cuda over one core (its stats() and reset_peak())."""

    def __init__(self, core: Any, index: Callable[[Any], int]) -> None:
        self._core = core
        self._index = index

    def nested(self, device: Any = None) -> dict[str, Any]:
        if self._core.model_active():
            out = dict(self._core.model_stats(self._index(device)))
            zero = _stat(0, 0, 0, 0)
            out.update(num_sync_all_streams=0, max_split_size=-1, oversize_allocations=dict(zero),
                       oversize_segments=dict(zero))
            return out
        s = self._core.stats(self._index(device))
        nbytes = _stat(s["allocated"], s["allocated_peak"], s["allocated_total"], s["freed_total"])
        count = _stat(s["allocations"], s["allocations_peak"], s["num_alloc"], s["num_free"])
        reserved = _stat(s["reserved"], s["reserved_peak"], s["reserved_total"], s["released_total"])
        segments = _stat(s["segments"], s["segments_peak"], s["num_segment_alloc"], s["num_segment_free"])
        zero = _stat(0, 0, 0, 0)
        out: dict[str, Any] = {}
        for name, value in (("allocated_bytes", nbytes), ("reserved_bytes", reserved), ("active_bytes", nbytes),
                            ("requested_bytes", nbytes), ("allocation", count), ("segment", segments),
                            ("active", count), ("inactive_split", zero), ("inactive_split_bytes", zero)):
            # one pool (blocks are never split): everything in "large_pool"
            out[name] = {"all": dict(value), "large_pool": dict(value), "small_pool": dict(zero)}
        out.update(num_alloc_retries=0, num_ooms=s["num_ooms"], num_sync_all_streams=0,
                   num_device_alloc=s["num_segment_alloc"], num_device_free=s["num_segment_free"], max_split_size=-1,
                   oversize_allocations=dict(zero), oversize_segments=dict(zero))
        return out

    def memory_stats(self, device: Any = None) -> dict[str, Any]:
        flat: dict[str, Any] = {}

        def walk(prefix: str, obj: Any) -> None:
            if isinstance(obj, dict):
                for k, v in obj.items():
                    walk(f"{prefix}.{k}" if prefix else k, v)
            else:
                flat[prefix] = obj

        walk("", self.nested(device))
        return dict(sorted(flat.items()))

    def memory_allocated(self, device: Any = None) -> int:
        return int(self._core.stats(self._index(device))["allocated"])

    def max_memory_allocated(self, device: Any = None) -> int:
        return int(self._core.stats(self._index(device))["allocated_peak"])

    def memory_reserved(self, device: Any = None) -> int:
        return int(self._core.stats(self._index(device))["reserved"])

    def max_memory_reserved(self, device: Any = None) -> int:
        return int(self._core.stats(self._index(device))["reserved_peak"])

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self._core.reset_peak(self._index(device))

    def reset_accumulated_memory_stats(self, device: Any = None) -> None:
        if self._core.model_active():
            self._core.model_reset_accumulated(self._index(device))
        # without a profile the cumulative counters only grow, as CUDA's do until this call; kept as is

    def empty_cache(self) -> None:
        self._core.empty_cache()  # the cached blocks of every device go back to the host

    def segments(self) -> list[dict[str, Any]]:
        """memory_snapshot()'s segments, as CUDA lists them: the model's, with a profile; none without
        (the totals are in memory_stats())."""
        if not self._core.model_active():
            return []
        out = []
        for dev in range(self._core.device_count()):
            for seg in self._core.model_segments(dev):
                blocks = [{"address": b["address"], "size": b["size"], "requested_size": b["requested_size"],
                           "state": "active_allocated" if b["allocated"] else "inactive", "frames": []}
                          for b in seg["blocks"]]
                out.append({"device": dev, "address": seg["address"], "total_size": seg["total_size"],
                            "allocated_size": seg["allocated_size"], "active_size": seg["allocated_size"],
                            "requested_size": seg["requested_size"], "stream": 0,
                            "segment_type": "small" if seg["small"] else "large",
                            "segment_pool_id": tuple(seg["pool_id"]), "is_expandable": bool(seg["expandable"]),
                            "frames": [], "blocks": blocks})
        return out

    def memory_snapshot(self, mempool_id: Any = None, include_traces: bool = True) -> list[Any]:
        return self.segments()

    def set_per_process_memory_fraction(self, fraction: float, device: Any = None) -> None:
        if not isinstance(fraction, float):
            raise TypeError("Invalid type for fraction argument, must be `float`")
        if not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        self._core.set_memory_fraction(self._index(device), fraction)

    def get_per_process_memory_fraction(self, device: Any = None) -> float:
        return float(self._core.memory_fraction(self._index(device)))

    def capacity_mem_get_info(self, device: Any = None) -> tuple[int, int]:
        """(free, total) of a profiled device: its memory less what it reserves, as cudaMemGetInfo."""
        i = self._index(device)
        total = int(self._core.memory_capacity(i))
        return max(0, total - int(self._core.stats(i)["reserved"])), total

    def host_mem_get_info(self, host: Callable[..., tuple[int, int]], device: Any = None) -> tuple[int, int]:
        """(free, total) of a device whose memory is the host's, as cudaMemGetInfo counts it: what the
        device has reserved is gone at once, written or not. Free is what the device will still
        grant: its capacity less what it holds, and no more than the host can give, which is the
        host's available memory less the pages of the device's blocks the host has not given yet
        (the host counts a page as used once it is written, CUDA counts it when reserved)."""
        i = self._index(device)  # refused as every per-device call refuses a bad index
        free, total = host()
        held = int(self._core.stats(i)["reserved"])
        own = int(self._core.memory_capacity(i)) - held
        return max(0, min(own, free - int(self._core.untouched_bytes()))), total

    def table(self, mem_get_info: Callable[..., tuple[int, int]]) -> dict[str, Any]:
        names = ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
                 "reset_accumulated_memory_stats", "empty_cache", "memory_snapshot",
                 "set_per_process_memory_fraction", "get_per_process_memory_fraction")
        out = {n: getattr(self, n if n != "reset_max_memory_allocated" else "reset_peak_memory_stats") for n in names}
        out["memory_stats_as_nested_dict"] = self.nested
        # a profiled device (the model is on exactly then, configure()) answers from its own memory
        out["mem_get_info"] = (self.capacity_mem_get_info if self._core.model_active()
                               else functools.partial(self.host_mem_get_info, mem_get_info))
        return out


def configure(core: Any, profile: Any, host_total: int) -> None:
    """Each device's memory: a profile's (address space reserved on demand, statistics from the
    model of CUDA's caching allocator) or, without one, the host's (host_total; 0: the core's own
    reading of the host). Before the first device allocation."""
    total = profile.total_memory if profile is not None else host_total
    if total > 0:
        for i in range(core.device_count()):
            core.set_memory_capacity(i, total)
    if profile is not None:
        core.set_reserve_on_demand(True)
        core.set_model_active(True)
        if profile.device == "cuda":
            core.set_blas_workspace(*blas_workspace_sizes(profile.get("major"), profile.get("minor"), os.environ))
        core.set_model_expandable(expandable_segments(os.environ))


def expandable_segments(env: Mapping[str, str]) -> bool:
    """PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF, PYTORCH_NPU_ALLOC_CONF) asks for expandable_segments:True."""
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF"):
        for option in env.get(name, "").split(","):
            key, _, value = option.partition(":")
            if key.strip() == "expandable_segments":
                return value.strip() in ("True", "true", "1")
    return False


def _check_env(value: str | None) -> bool | None:
    """c10::utils::check_env: True for 1/true/yes/on, False for 0/false/no/off, else None."""
    if value is None:
        return None
    v = value.strip().lower()
    return True if v in ("1", "true", "yes", "on", "y") else False if v in ("0", "false", "no", "off", "n") else None


def blas_workspace_sizes(major: Any, minor: Any, env: Mapping[str, str]) -> tuple[int, int]:
    """(cuBLAS, cuBLASLt) workspace bytes a GPU of compute capability major.minor takes per handle
    and stream, as PyTorch's CublasHandlePool.cpp sizes them: CUBLAS_WORKSPACE_CONFIG's :SIZE_KiB:COUNT
    pairs, else 32 MiB on compute capability 9.0 and 8 MiB + 128 KiB elsewhere; cuBLASLt's
    CUBLASLT_WORKSPACE_SIZE KiB (1 MiB unless set), no larger than cuBLAS's, and none of its own when
    TORCH_CUBLASLT_UNIFIED_WORKSPACE is on (cuBLASLt then shares cuBLAS's)."""
    sm90 = major == 9 and minor == 0
    default = 4096 * 8 * 1024 if sm90 else 4096 * 1024 * 2 + 16 * 1024 * 8
    cublas = default
    config = env.get("CUBLAS_WORKSPACE_CONFIG")
    if config is not None:
        pairs = re.findall(r":([0-9]+):([0-9]+)", config)
        if pairs:
            cublas = sum(int(size) * 1024 * int(count) for size, count in pairs)
    lt = 1024 * 1024
    given = env.get("CUBLASLT_WORKSPACE_SIZE")
    if given is not None:
        try:
            lt = int(given) * 1024
        except ValueError:
            pass
    unified = _check_env(env.get("TORCH_CUBLASLT_UNIFIED_WORKSPACE"))
    if unified is True:
        return cublas, 0
    if unified is None:  # unified sizing by default: Lt's workspace is capped at cuBLAS's
        lt = min(lt, cublas)
    return cublas, lt


def bind_storage_resize(bindings: Any, torch: Any, core: Any) -> None:
    """UntypedStorage.resize_ for device storages. torch's own raises "built without USE_CUDA" for a
    cuda storage in a CPU build; FSDP2 frees (resize_(0)) and re-allocates its unsharded parameters
    through it. The core resizes through the storage's own allocator (the device's: counted in the
    statistics), keeping the first min(old, new) bytes, as CUDA's resize does."""
    storage_cls = torch.UntypedStorage
    original = storage_cls.resize_

    def resize_(self: Any, size: int) -> Any:
        if self.device.type != "cuda":
            return original(self, size)
        core.resize_storage(self, int(size))
        return self

    bindings.bind(storage_cls, "resize_", resize_, "torch.UntypedStorage.resize_", "emulated")


def bind_allocator_apis(bindings: Any, torch: Any, core: Any, table: MemoryTable, device_type: str = "cuda") -> None:
    """The torch._C functions behind torch.cuda's allocator APIs, which a CPU build lacks; torch.cuda's
    own Python (caching_allocator_alloc's argument checks, _snapshot, host_memory_stats' flattening)
    then runs over them. Memory history is not recorded: asking for it raises CapabilityError."""
    from ..errors import CapabilityError
    from . import graph_trees

    def raw_alloc(size: int, stream: int) -> int:
        return int(core.raw_alloc(int(size), core.current_device()))

    def raw_delete(ptr: int) -> None:
        if not core.pool_raw_delete(int(ptr)):  # a private pool's block goes back to its pool
            core.raw_delete(int(ptr))

    def memory_snapshot(arg: Any = None) -> dict[str, Any]:
        return {"segments": table.segments(), "device_traces": [[] for _ in range(core.device_count())],
                "external_annotations": [], "allocator_settings": {}}

    def record_memory_history(enabled: Any = "all", *args: Any, **kwargs: Any) -> None:
        if enabled is None:
            return None  # switching history off: there is none
        raise CapabilityError(
            f"torch.{device_type}.memory._record_memory_history: allocation history (stack traces per block) is "
            f"not recorded on the emulated {device_type} device; read torch.{device_type}.memory_snapshot() for the "
            "segments and blocks (with a device profile), memory_stats() for the totals, or run the program on a GPU")

    class MemPool:  # noqa: D401 - torch.cuda.MemPool
        """torch.cuda.MemPool: a private pool of the device (csrc/graphs/pools.cpp, the pools CUDA graphs
        use), named by an id as graph_pool_handle() makes one; torch.cuda.use_mem_pool routes the
        thread's allocations to it. It holds its memory while it lives (counted in memory_reserved());
        when it goes, its free segments go back (MemPool's destructor empties its cache). A custom allocator,
        use_on_oom and no_split are not kept: CapabilityError."""

        def __init__(self, allocator: Any = None, use_on_oom: bool = False, no_split: bool = False) -> None:
            if allocator is not None or use_on_oom or no_split:
                what = "allocator=" if allocator is not None else "use_on_oom=True" if use_on_oom else "no_split=True"
                raise CapabilityError(
                    f"torch.{device_type}.MemPool({what}): the emulated {device_type} device's pools use its own "
                    "allocator, split blocks and are not used on out of memory; create the pool without it, or run "
                    "on a GPU")
            from .graphs import graph_pool_handle

            self._device = int(core.current_device())
            self._id = graph_pool_handle()
            core.pool_retain(self._device, self._id)  # createOrIncrefPool
            key = (self._device, self._id)
            graph_trees.pool_users[key] = graph_trees.pool_users.get(key, 0) + 1

        @property
        def id(self) -> tuple[int, int]:
            return self._id

        @property
        def allocator(self) -> Any:
            return None

        def use_count(self) -> int:
            return graph_trees.pool_users.get((self._device, self._id), 0)

        def snapshot(self, include_traces: bool = True) -> list[Any]:
            return [seg for seg in table.segments() if tuple(seg["segment_pool_id"]) == self._id]

        def __del__(self) -> None:
            key = (self._device, self._id)
            if graph_trees.pool_users.get(key, 0) > 1:
                graph_trees.pool_users[key] -= 1
            else:
                graph_trees.pool_users.pop(key, None)
            try:
                core.pool_release(self._device, self._id)  # releasePool
                core.pool_empty_cache(self._device, self._id)  # emptyCache(id): its free segments go back
            except Exception:  # noqa: BLE001 - at interpreter exit the core may be gone
                pass

    module = getattr(torch, device_type, None)
    if device_type == "cuda":
        for owner in (module, getattr(module, "memory", None)):
            if owner is not None and hasattr(owner, "MemPool"):
                bindings.bind(owner, "MemPool", MemPool, f"torch.{device_type}.MemPool", "emulated")
    for name, fn in (("_cuda_cudaCachingAllocator_raw_alloc", raw_alloc),
                     ("_cuda_cudaCachingAllocator_raw_delete", raw_delete),
                     ("_cuda_memorySnapshot", memory_snapshot),
                     ("_cuda_record_memory_history", record_memory_history),
                     ("_cuda_hostMemoryStats", core.host_stats),
                     ("_host_emptyCache", core.empty_host_cache),
                     ("_cuda_clearCublasWorkspaces", core.clear_blas_workspaces)):
        if _torch_compat.binds_over_cuda_entry(torch, name):
            bindings.bind(torch._C, name, fn, f"torch._C.{name}", "emulated")
