"""torch.cuda's memory statistics, read from the emulated device's allocator (csrc/runtime/allocator.cpp).

The allocator rounds every block to 512 bytes as CUDA's caching allocator does, so "allocated" moves
by exactly what the program allocates; like CUDA's, it keeps freed blocks over 128 KiB for the next
allocation of about their size: they stay "reserved" until empty_cache() gives them back (or never,
with PYTORCH_NO_CUDA_MEMORY_CACHING=1); smaller blocks go back to the host's malloc. Blocks are not split, so one pool ("large_pool") holds them all.
mem_get_info() is the host's (free, total): the device's memory is the host's memory.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["MemoryTable", "bind_storage_resize"]

_POOLS = ("all", "large_pool", "small_pool")


def _stat(current: int, peak: int, allocated: int, freed: int) -> dict[str, int]:
    return {"current": current, "peak": peak, "allocated": allocated, "freed": freed}


class MemoryTable:
    """The memory functions of torch.cuda over one core (its stats() and reset_peak())."""

    def __init__(self, core: Any, index: Callable[[Any], int]) -> None:
        self._core = core
        self._index = index

    def nested(self, device: Any = None) -> dict[str, Any]:
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
        out.update(num_alloc_retries=0, num_ooms=0, num_sync_all_streams=0,
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
        return None  # the cumulative counters only grow, as CUDA's do until this call; kept as is

    def empty_cache(self) -> None:
        self._core.empty_cache()  # the cached blocks of every device go back to the host

    def memory_snapshot(self, mempool_id: Any = None, include_traces: bool = True) -> list[Any]:
        return []  # segments are not listed (their totals are in memory_stats())

    def set_per_process_memory_fraction(self, fraction: float, device: Any = None) -> None:
        if not 0 <= float(fraction) <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")

    def table(self, mem_get_info: Callable[..., tuple[int, int]]) -> dict[str, Any]:
        names = ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
                 "reset_accumulated_memory_stats", "empty_cache", "memory_snapshot",
                 "set_per_process_memory_fraction")
        out = {n: getattr(self, n if n != "reset_max_memory_allocated" else "reset_peak_memory_stats") for n in names}
        out["memory_stats_as_nested_dict"] = self.nested
        out["mem_get_info"] = mem_get_info
        return out


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
