"""torch.cuda.Stream / Event / stream() for the CPU.

CPU work runs synchronously on the calling thread, so every stream is already in order with every
other: wait_stream / wait_event / synchronize have nothing to wait for. An Event records the host
clock (time.perf_counter) when record() is called, which is exactly when all work queued before it
has finished, so elapsed_time() returns real milliseconds, as CUDA's does.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

__all__ = [
    "Stream",
    "ExternalStream",
    "Event",
    "StreamContext",
    "stream",
    "current_stream",
    "default_stream",
    "set_stream",
]

_ids = itertools.count(1)


class _Local(threading.local):
    stream: Any = None  # a class default: a missing per-thread value costs no AttributeError


_local = _Local()


class Stream:
    """A CPU stand-in for torch.cuda.Stream: ordered with every other stream by construction."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.stream_id = next(_ids)
        self.priority = priority
        self.device_index = 0
        self.device_type = "cpu"

    @property
    def cuda_stream(self) -> int:  # engines pass it to kernels / use it as a key
        return self.stream_id

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cpu")

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        self._ctx = StreamContext(self)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash(("cudashim.Stream", self.stream_id))

    def __repr__(self) -> str:
        return f"<torch.cuda.Stream device=cpu cuda_stream={self.stream_id:#x} (cudashim)>"


class _DefaultStream(Stream):
    def __init__(self) -> None:
        super().__init__()
        self.stream_id = 0


class ExternalStream(Stream):
    def __init__(self, stream_ptr: int, device: Any = None, **kwargs: Any) -> None:
        super().__init__()
        self.stream_id = int(stream_ptr)


_DEFAULT = _DefaultStream()


class Event:
    """A CPU stand-in for torch.cuda.Event with a working elapsed_time()."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 **kwargs: Any) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._t: float | None = None

    def record(self, stream: Any = None) -> None:
        self._t = time.perf_counter()

    def wait(self, stream: Any = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end_event: "Event") -> float:
        # the messages are CUDA's, so code that matches on them keeps working
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._t is None or getattr(end_event, "_t", None) is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._t - self._t) * 1000.0

    def ipc_handle(self) -> Any:
        from ._cpu_limits import unsupported

        unsupported("ipc_export_alignment", "torch.cuda.Event.ipc_handle",
                    "share results between processes through torch.distributed or a file instead")

    @property
    def cuda_event(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<torch.cuda.Event timing={self.enable_timing} recorded={self._t is not None} (cudashim)>"


def current_stream(device: Any = None) -> Stream:
    return _local.stream or _DEFAULT


def default_stream(device: Any = None) -> Stream:
    return _DEFAULT


def set_stream(stream: Any) -> None:
    if stream is not None:
        _local.stream = stream


class StreamContext:
    """`with torch.cuda.stream(s):` makes s the current stream of this thread for the block."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._prev: Any = None

    def __enter__(self) -> Any:
        if self.stream is None:
            return None
        self._prev = _local.stream
        _local.stream = self.stream
        return self.stream

    def __exit__(self, *exc: Any) -> None:
        if self.stream is not None:
            _local.stream = self._prev


def stream(stream: Any) -> StreamContext:
    return StreamContext(stream)


def _reset() -> None:
    _local.__dict__.clear()
