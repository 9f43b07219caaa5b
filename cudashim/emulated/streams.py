"""torch.cuda.Stream / Event on the emulated device: torch.Stream / torch.Event of device "cuda"; the
same for the simulated NPU's torch.npu (device "npu", the handle named npu_stream).

They go through the core's guard (csrc/runtime/guard.cpp), so they are real c10 streams and events:
record_stream(), torch.accelerator and the autograd engine take them. Work runs when it is issued,
so every stream is ordered with every other; events read the host clock when recorded, so
elapsed_time() is real wall time.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

__all__ = ["table"]


def table(torch: Any, index: Callable[[Any], int], alias_class: Callable[[type, Any], type] | None,
          device_type: str = "cuda", module: str = "torch.cuda",
          join: Callable[[int, int, int], None] | None = None) -> dict[str, Any]:
    """torch.cuda's (or the simulated torch.npu's) stream and event names -> values, for devices
    checked by index(); alias_class makes a class that constructs through a function and answers
    isinstance() for another (None: Event is the function). The raw handle is <device_type>_stream.
    join(device, waited, waiting): the core's capture_join (None where graphs are not captured)."""
    handle = f"{device_type}_stream"
    kinds = torch._C._autograd.DeviceType  # c10's DeviceType numbers, as torch.Stream reports them
    type_index = int(kinds.CUDA if device_type == "cuda" else kinds.PrivateUse1)

    class Stream(torch.Stream):
        """torch.cuda.Stream: a stream of the emulated device."""

        def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> Any:
            if {"stream_id", "device_index", "device_type"} <= kwargs.keys():
                return super().__new__(cls, **kwargs)
            return super().__new__(cls, device=torch.device(device_type, index(device)), priority=priority)

        def _handle(self) -> int:  # engines pass it to kernels or use it as a key
            return self.stream_id

        def wait_stream(self, stream: Any) -> None:
            # every stream is already ordered with every other; a graph capture on `stream` extends to
            # this one, as CUDA's does to a stream that waits on a capturing one
            if join is not None and stream.device_index == self.device_index:
                join(self.device_index, stream.stream_id, self.stream_id)

        def record_event(self, event: Any = None) -> Any:
            event = make_event() if event is None else event
            event.record(self)
            return event

        def __repr__(self) -> str:
            return f"<{module}.Stream device={self.device} {handle}={self.stream_id:#x}>"

    setattr(Stream, handle, property(Stream._handle))

    def wrap(s: Any) -> Any:
        return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)

    class ExternalStream(Stream):
        def __new__(cls, stream_ptr: int, device: Any = None, **kwargs: Any) -> Any:
            return Stream.__new__(cls, stream_id=int(stream_ptr), device_index=index(device), device_type=type_index)

    def make_event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                   external: bool = False) -> Any:
        return torch.Event(device=device_type, enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)

    # a real torch.Event (its C methods accept only that exact type as the other event), behind a
    # class that isinstance() and subclassing treat as torch.cuda.Event
    Event: Any = make_event
    if alias_class is not None:
        Event = alias_class(torch.Event, make_event)
        Event.__name__ = Event.__qualname__ = "Event"
        Event.__signature__ = inspect.signature(make_event)  # its metaclass's __call__ would show (*args, **kwargs)

    def current_stream(device: Any = None) -> Any:
        return wrap(torch._C._accelerator_getStream(index(device)))

    def default_stream(device: Any = None) -> Any:
        return Stream(stream_id=0, device_index=index(device), device_type=type_index)

    def set_stream(stream: Any) -> None:
        if stream is not None:
            torch._C._accelerator_setStream(stream)

    class StreamContext:
        """`with torch.cuda.stream(s):` makes s the current stream of its device for the block."""

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

    def stream(stream: Any) -> StreamContext:
        return StreamContext(stream)

    return {"Stream": Stream, "ExternalStream": ExternalStream, "Event": Event, "StreamContext": StreamContext,
            "stream": stream, "current_stream": current_stream, "default_stream": default_stream,
            "set_stream": set_stream}
