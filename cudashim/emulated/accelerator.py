"""torch.accelerator reporting the emulated device as "cuda".

PyTorch asks its CUDA hooks whether an accelerator exists; in a CPU build those are fixed when torch
is imported, before the device loads (it never loads earlier: native code comes after `import
torch`). So torch.accelerator's functions are answered here, from the same device module.
"""

from __future__ import annotations

from typing import Any

from .cuda import distinct

__all__ = ["table"]


def table(torch: Any, dm: Any) -> dict[str, Any]:
    cuda = torch.device("cuda")  # the device count is fixed once the core is loaded

    def current_accelerator(check_available: bool = False) -> Any:
        # asked per compiled frame call (Dynamo's current-stream lookup): kept cheap
        return cuda if dm.is_available() else None

    class device_index:  # noqa: N801 - torch.accelerator.device_index
        def __init__(self, device: int | None, /) -> None:
            self.idx = device
            self.prev_idx = -1

        def __enter__(self) -> None:
            if self.idx is not None:
                self.prev_idx = dm.current_device()
                dm.set_device(self.idx)

        def __exit__(self, *exc: Any) -> bool:
            if self.idx is not None:
                dm.set_device(self.prev_idx)
            return False

    mem = dm.memory
    table = {
        "is_available": dm.is_available,
        "current_accelerator": current_accelerator,
        "device_count": dm.device_count,
        "current_device_index": dm.current_device,
        "current_device_idx": dm.current_device,
        "set_device_index": dm.set_device,
        "set_device_idx": dm.set_device,
        "device_index": device_index,
        "synchronize": dm.synchronize,
        "get_device_capability": lambda device=None: {"major": 8, "minor": 0},
        "empty_cache": mem.empty_cache,
        "empty_host_cache": lambda: None,
        "get_memory_info": dm.table()["mem_get_info"],
        "memory_stats": mem.memory_stats,
        "memory_allocated": mem.memory_allocated,
        "max_memory_allocated": mem.max_memory_allocated,
        "memory_reserved": mem.memory_reserved,
        "max_memory_reserved": mem.max_memory_reserved,
        "reset_accumulated_memory_stats": mem.reset_accumulated_memory_stats,
        "reset_peak_memory_stats": mem.reset_peak_memory_stats,
    }
    return {k: v if isinstance(v, type) else distinct(v) for k, v in table.items()}

