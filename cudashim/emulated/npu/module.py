"""torch.npu's functions on the simulated NPU: the emulated device's module, keyed to `npu`.

The simulated torch_npu.npu (simsite/torch_npu/npu/__init__.py) is filled from table(): devices,
the current device, generators and memory statistics from the PrivateUse1 core, streams and events
as real c10 streams of device type npu (torch.Stream / torch.Event), the stream handle under
torch_npu's name `npu_stream`. Device properties name the simulated part (Ascend910B, simulated), or the part a device profile
(CUDASHIM_PROFILE=ascend910b2, ...) names, with its memory.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

from ..cuda import DeviceModule, distinct

__all__ = ["NpuDeviceModule", "NpuDeviceProperties", "stream_table"]

_NAME = "Ascend910B (simulated on the CPU)"


@dataclasses.dataclass(frozen=True)
class NpuDeviceProperties:
    """torch.npu.get_device_properties() of the simulated NPU: torch_npu's fields, the host's memory."""

    name: str = _NAME
    total_memory: int = 0
    cube_core_num: int = 24  # a 910B's AI cores, so code that sizes grids from them gets a 910B answer
    vector_core_num: int = 48
    L2_cache_size: int = 0
    major: int = 0
    minor: int = 0
    multi_processor_count: int = 24
    gcnArchName: str = "Ascend910B"  # read by Inductor's cache key for the device torch_npu calls its gpu type


def _host_memory() -> tuple[int, int]:
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


def _properties(prof: Any) -> NpuDeviceProperties:
    """The simulated part's properties: a device profile's (emulated/profiles/), else a 910B with the host's memory."""
    if prof is None:
        return NpuDeviceProperties(total_memory=_host_memory()[1])
    cube = prof.get("cube_core_num", NpuDeviceProperties.cube_core_num)
    return NpuDeviceProperties(name=prof.name, total_memory=prof.total_memory, cube_core_num=cube,
                               vector_core_num=prof.get("vector_core_num", NpuDeviceProperties.vector_core_num),
                               L2_cache_size=prof.get("L2_cache_size", 0), multi_processor_count=cube)


class NpuDeviceModule(DeviceModule):
    """DeviceModule answering for `npu` devices."""

    device_type = "npu"

    def __init__(self, torch: Any, core: Any) -> None:
        from .device import profile

        super().__init__(torch, core, lambda: _properties(profile()), lambda device=None: _host_memory())

    def device_of(self, obj: Any) -> Any:
        cls = self.device_ctx()
        return cls(obj.get_device() if getattr(obj, "is_npu", False) else -1)

    def get_device_capability(self, device: Any = None) -> tuple[int, int] | None:
        """As torch_npu answers (a compatibility value, not the NPU's): None, unless
        TORCH_NPU_DEVICE_CAPABILITY="major.minor" names one; a malformed value warns and gives None."""
        self.index(device)
        raw = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY", "")
        major, dot, minor = raw.partition(".")
        if raw and not (dot and major.isdigit() and minor.isdigit()):
            warnings.warn(f"torch.npu.get_device_capability can't parse TORCH_NPU_DEVICE_CAPABILITY={raw!r}; "
                          "expected 'major.minor', e.g. '8.0'")
        if not (dot and major.isdigit() and minor.isdigit()):
            return None
        return int(major), int(minor)


def stream_table(torch: Any, index: Any) -> dict[str, Any]:
    """torch.npu's stream and event names -> values: the emulated device's, for device type npu."""
    from ..streams import table

    out = table(torch, index, None, device_type="npu", module="torch_npu.npu")
    del out["ExternalStream"]  # torch_npu's ExternalStream wraps an aclrtStream handle: none here
    for name in ("current_stream", "default_stream", "set_stream"):
        out[name] = distinct(out[name])
    return out
