"""torch_npu.npu.memory of the simulated torch_npu: the core allocator's statistics."""
from cudashim.errors import CapabilityError

from . import _table

__all__ = [n for n in ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                       "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
                       "reset_max_memory_cached", "empty_cache", "mem_get_info", "memory_summary",
                       "set_per_process_memory_fraction", "get_per_process_memory_fraction", "memory_stats_as_nested_dict",
                       "reset_accumulated_memory_stats", "caching_allocator_alloc", "caching_allocator_delete")
           if n in _table]
globals().update({n: _table[n] for n in __all__})
__all__.append("host_empty_cache")


def host_empty_cache():
    """torch_npu.npu.host_empty_cache: pinned host memory is returned as it is freed; nothing is cached."""
    import torch_npu._C

    torch_npu._C._npu_hostEmptyCache()


def _not_simulated(name):
    def call(*args, **kwargs):
        raise CapabilityError(f"torch.npu.memory.{name} (allocator history snapshots) is not simulated; "
                              "run this part on an NPU or skip it under CUDASHIM_SIMULATE")
    call.__name__ = name
    return call


_record_memory_history = _not_simulated("_record_memory_history")
_snapshot = _not_simulated("_snapshot")
_dump_snapshot = _not_simulated("_dump_snapshot")
