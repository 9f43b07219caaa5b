"""Hardware discovery without torch and without a device context.

Everything reads under an injectable root (argument, else $CUDASHIM_SYSROOT, else '/'; see
device.py), so tests and `cudashim doctor` can point it at a fake tree. Importing this package
imports neither torch nor pynvml (NVML is loaded inside nvidia.query_nvml only).

- accelerator_kind(root=None) -> 'ascend' | 'nvidia' | 'cpu' (Ascend first; cached per root,
  cleared by cudashim._state.reset())
- device_count(kind=None, root=None)
- discover_gpus(root=None, nvml=None) -> [GpuDevice]; query_nvml()
- discover_npu_devices(root=None) -> [NpuDevice(entry, physical_id, numa_node)]; npu_numa_node(index)
- physical_cores_by_numa(root=None), numa_cpus(root=None)
- visible_device_env_name(kind=None), visible_device_ids(value, name), assign_visible_devices(...)

The names resolve lazily (PEP 562): every shimmed interpreter runs detection before user code, and
detection needs _detect and device only, not the parsers of cpu.py or ascend.py's NUMA placement.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from ._detect import KINDS, Kind, accelerator_kind, device_count
    from ._errors import HardwareError
    from .ascend import NpuDevice, discover_npu_devices, npu_numa_node
    from .cpu import numa_cpus, physical_cores_by_numa
    from .nvidia import GpuDevice, NvmlDevice, discover_gpus, query_nvml
    from .visible import (
        ENV_NAMES,
        assign_visible_devices,
        format_visible_devices,
        visible_device_env_name,
        visible_device_ids,
    )

__all__ = [
    "KINDS",
    "Kind",
    "ENV_NAMES",
    "HardwareError",
    "GpuDevice",
    "NvmlDevice",
    "NpuDevice",
    "accelerator_kind",
    "device_count",
    "discover_gpus",
    "query_nvml",
    "discover_npu_devices",
    "npu_numa_node",
    "numa_cpus",
    "physical_cores_by_numa",
    "visible_device_env_name",
    "visible_device_ids",
    "format_visible_devices",
    "assign_visible_devices",
]

# public name -> submodule defining it
_LAZY: dict[str, str] = {
    "KINDS": "_detect", "Kind": "_detect", "accelerator_kind": "_detect", "device_count": "_detect",
    "HardwareError": "_errors",
    "GpuDevice": "nvidia", "NvmlDevice": "nvidia", "discover_gpus": "nvidia", "query_nvml": "nvidia",
    "NpuDevice": "ascend", "discover_npu_devices": "ascend", "npu_numa_node": "ascend",
    "numa_cpus": "cpu", "physical_cores_by_numa": "cpu",
    "ENV_NAMES": "visible", "visible_device_env_name": "visible", "visible_device_ids": "visible",
    "format_visible_devices": "visible", "assign_visible_devices": "visible",
}


def __getattr__(name: str) -> object:
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = f"{__name__}.{sub}"
    __import__(module)  # not importlib.import_module: detection runs before user code, importlib costs
    value = getattr(sys.modules[module], name)
    globals()[name] = value  # once resolved, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
