"""Stand-in for torch_npu.npu (torch.npu once registered).

__all__ is the real one from the wheel (written to _real_all.py by tests/ascend/_wheel.py), because
transfer_to_npu copies every name in it onto torch.cuda. Names with behaviour a test looks at are
defined below; the rest are recorders. NPUGraph and graph come from the wheel's graphs.py (real code)
over the recorded native base in torch_npu._C.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

from .. import RECORD, recorder
from . import amp, memory, random  # noqa: F401
from ._real_all import NAMES as __all__  # noqa: F401
from .graphs import NPUGraph, graph  # noqa: F401  (real upstream classes)

AVAILABLE = True  # what the fake hardware answers; tests may flip it
_handles = itertools.count(0x7F00)


def is_available() -> bool:
    return AVAILABLE


def device_count() -> int:
    return 2 if AVAILABLE else 0


current_device = recorder("npu.current_device", 0)
set_device = recorder("npu.set_device")
synchronize = recorder("npu.synchronize")
empty_cache = recorder("npu.empty_cache")
host_empty_cache = recorder("npu.host_empty_cache")
get_device_capability = recorder("npu.get_device_capability", (9, 0))
get_device_name = recorder("npu.get_device_name", "Ascend910B-standin")
get_autocast_dtype = recorder("npu.get_autocast_dtype")
set_autocast_dtype = recorder("npu.set_autocast_dtype")
default_generators: tuple[Any, ...] = ()


class Stream:
    """An NPU stream: the handle is npu_stream (there is no cuda_stream upstream)."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = device
        self.priority = priority
        self.npu_stream = next(_handles)

    def wait_stream(self, other: "Stream") -> None:
        RECORD.append(("npu.Stream.wait_stream", (other,), {}))


class ExternalStream(Stream):
    pass


class SyncLaunchStream(Stream):
    pass


class Event:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        RECORD.append(("npu.Event", args, kwargs))


_current = Stream()


def current_stream(device: Any = None) -> Stream:
    return _current


def default_stream(device: Any = None) -> Stream:
    return _current


@contextlib.contextmanager
def stream(s: Stream):  # type: ignore[no-untyped-def]
    RECORD.append(("npu.stream.enter", (s,), {}))
    yield s
    RECORD.append(("npu.stream.exit", (s,), {}))


def _lazy_call(fn: Any) -> None:
    fn()


class FloatTensor:
    pass


for _name in __all__:
    if _name not in globals():
        globals()[_name] = recorder(f"npu.{_name}")
