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
"""

from __future__ import annotations

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
