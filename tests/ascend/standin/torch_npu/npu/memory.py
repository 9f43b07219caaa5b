"""Stand-in for torch_npu.npu.memory: every call is recorded."""

from .. import recorder

_NAMES = (
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "mem_get_info",
    "empty_cache", "memory_stats", "reset_peak_memory_stats", "set_per_process_memory_fraction",
    "_record_memory_history", "_snapshot", "_dump_snapshot", "_set_allocator_settings",
)
for _n in _NAMES:
    globals()[_n] = recorder(f"npu.memory.{_n}", 0)
