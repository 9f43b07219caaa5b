"""What the host answers for the emulated cuda device: its properties and its memory.

The device's memory is the host's, so `mem_get_info()` is the host's (free, total): `MemAvailable`
and `MemTotal` from /proc/meminfo, bounded by the cgroup v2 limit (`memory.max` / `memory.current`)
when a container sets a lower one. Properties, the documented CPU answer:
  name                    "CPU (<model name from /proc/cpuinfo>)"
  major, minor            8, 0  -- an Ampere-class answer: programs choose bf16 and generic paths,
                                   never Hopper/Blackwell-only ones (sm90/sm100 kernels, FP8)
  total_memory            host memory (mem_get_info()[1])
  multi_processor_count   os.cpu_count()
  warp_size               32, so code that divides work by warps keeps its arithmetic
Every read goes through one seam rooted at CUDASHIM_SYSROOT (tests point it at a fake tree).

With a device profile (CUDASHIM_PROFILE, emulated/profiles/) every property is the profiled GPU's
instead, and its memory is the profile's (profile_properties()).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CpuDeviceProperties", "host_properties", "mem_get_info", "profile_properties"]


def _read(path: str) -> str | None:
    root = os.environ.get("CUDASHIM_SYSROOT") or "/"
    try:
        with open(os.path.join(root, path.lstrip("/")), encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _model_name() -> str:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    import platform

    return platform.processor() or platform.machine() or "unknown"


def _kv_kb(text: str | None, keys: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        if name in keys:
            parts = rest.split()
            if parts:
                out[name] = int(parts[0]) * 1024
    return out


def _cgroup_limit() -> tuple[int, int] | None:
    limit, current = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    if not limit or not current or limit.strip() == "max":
        return None
    try:
        return int(limit.strip()), int(current.strip())
    except ValueError:
        return None


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of host memory this process may use."""
    info = _kv_kb(_read("/proc/meminfo"), ("MemTotal", "MemAvailable", "MemFree"))
    total = info.get("MemTotal", 0)
    free = info.get("MemAvailable", info.get("MemFree", 0))
    cg = _cgroup_limit()
    if cg is not None and 0 < cg[0] < total:
        total, free = cg[0], max(0, min(free, cg[0] - cg[1]))
    return free, total


@dataclass(frozen=True)
class CpuDeviceProperties:
    name: str
    major: int = 8
    minor: int = 0
    total_memory: int = 0
    multi_processor_count: int = 1
    warp_size: int = 32
    is_integrated: int = 1
    is_multi_gpu_board: int = 0
    max_threads_per_multi_processor: int = 2048
    L2_cache_size: int = 0
    gcnArchName: str = ""
    uuid: str = "cpu"
    pci_bus_id: int = 0
    pci_device_id: int = 0
    pci_domain_id: int = 0
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 49152
    shared_memory_per_block_optin: int = 49152
    shared_memory_per_multiprocessor: int = 49152
    max_threads_per_block: int = 1024
    clock_rate: int = 0
    memory_clock_rate: int = 0
    memory_bus_width: int = 0
    _extra: dict = field(default_factory=dict, repr=False, compare=False)
    _source: str = field(default="cpu", repr=False, compare=False)

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2**20}MB, multi_processor_count={self.multi_processor_count}, "
                f"cudashim='{self._source}')")


def host_properties() -> CpuDeviceProperties:
    """The properties every emulated cuda device reports."""
    return CpuDeviceProperties(name=f"CPU ({_model_name()})", total_memory=mem_get_info()[1],
                               multi_processor_count=os.cpu_count() or 1)


def profile_properties(profile: Any) -> CpuDeviceProperties:
    """The properties of the GPU a device profile (emulated/profiles/) describes."""
    fields = {k: v for k, v in profile.properties.items() if k in CpuDeviceProperties.__dataclass_fields__}
    fields.setdefault("is_integrated", 0)
    return CpuDeviceProperties(name=profile.name, total_memory=profile.total_memory, uuid=f"cudashim-{profile.key}",
                               _source=f"profile {profile.key}", **fields)
