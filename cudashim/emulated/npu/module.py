"""torch.npu's functions on the simulated NPU: the emulated device's module, keyed to `npu`.

The simulated torch_npu.npu (simsite/torch_npu/npu/__init__.py) is filled from table(): devices,
the current device, generators and memory statistics from the PrivateUse1 core, streams and events
as real c10 streams of device type npu (torch.Stream / torch.Event), the stream handle under
torch_npu's name `npu_stream`. Device properties name the simulated part (Ascend910B, simulated).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..cuda import DeviceModule, distinct

__all__ = ["NpuDeviceModule", "NpuDeviceProperties", "stream_table"]

_NAME = "Ascend910B (simulated on the CPU)"
_NPU_TYPE = 20  # c10::DeviceType::PrivateUse1, the type index torch.Stream reports


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


class NpuDeviceModule(DeviceModule):
    """DeviceModule answering for `npu` devices."""

    device_type = "npu"

    def __init__(self, torch: Any, core: Any) -> None:
        super().__init__(torch, core, lambda: NpuDeviceProperties(total_memory=_host_memory()[1]),
                         lambda device=None: _host_memory())

    def device_of(self, obj: Any) -> Any:
        cls = self.device_ctx()
        return cls(obj.get_device() if getattr(obj, "is_npu", False) else -1)


def stream_table(torch: Any, index: Any) -> dict[str, Any]:
    """torch.npu's stream and event names -> values."""

    class Stream(torch.Stream):
        """torch.npu.Stream of the simulated NPU: a c10 stream; work runs when issued."""

        def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> Any:
            if {"stream_id", "device_index", "device_type"} <= kwargs.keys():
                return super().__new__(cls, **kwargs)
            return super().__new__(cls, device=torch.device("npu", index(device)), priority=priority)

        @property
        def npu_stream(self) -> int:
            return self.stream_id

        def wait_stream(self, stream: Any) -> None:
            return None  # every stream is already ordered with every other

        def record_event(self, event: Any = None) -> Any:
            event = torch.Event(device="npu") if event is None else event
            event.record(self)
            return event

        def __repr__(self) -> str:
            return f"<torch_npu.npu.Stream device={self.device} npu_stream={self.stream_id:#x}>"

    def wrap(s: Any) -> Any:
        return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)

    def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **kw: Any) -> Any:
        return torch.Event(device="npu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def current_stream(device: Any = None) -> Any:
        return wrap(torch._C._accelerator_getStream(index(device)))

    def default_stream(device: Any = None) -> Any:
        return Stream(stream_id=0, device_index=index(device), device_type=_NPU_TYPE)

    def set_stream(stream: Any) -> None:
        if stream is not None:
            torch._C._accelerator_setStream(stream)

    class StreamContext:
        def __init__(self, stream: Any) -> None:
            self.stream = stream
            self._prev: Any = None

        def __enter__(self) -> Any:
            if self.stream is not None:
                self._prev = current_stream(self.stream.device_index)
                set_stream(self.stream)
            return self.stream

        def __exit__(self, *exc: Any) -> None:
            if self.stream is not None:
                set_stream(self._prev)

    return {"Stream": Stream, "Event": Event, "StreamContext": StreamContext,
            "stream": StreamContext, "current_stream": distinct(current_stream),
            "default_stream": distinct(default_stream), "set_stream": distinct(set_stream)}
