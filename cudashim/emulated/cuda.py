"""torch.cuda as the device module of the emulated device (csrc/): what each function answers.

Devices, the current device and its range errors, generators and allocation statistics come
from the native core; torch.cuda's own Python (random.py's seeding, memory.py's summaries) then
works unchanged over them once the core is "initialized" (torch.cuda._initialized, the generators).
Properties are the documented CPU answer (host.py: an Ampere-class 8.0 device whose memory is the host's).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .memory import MemoryTable

__all__ = ["DeviceModule", "distinct", "nvtx_table"]

_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def distinct(fn: Any) -> Any:
    """fn as a function of its own. Dynamo keys its handlers of torch functions by function, and
    equal bound methods (one method bound under two names) collide. It reports fn's signature
    (torch.cuda's documented one: inspect, and the tools built on it, read it)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "cuda_fn")
    call.__doc__ = getattr(fn, "__doc__", None)
    try:
        call.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass  # a builtin without a text signature: the table wraps those in Python functions
    return call


class DeviceModule:
    """The torch.cuda functions answered by one loaded core."""

    device_type = "cuda"  # the simulated NPU's module (emulated/npu/module.py) answers for "npu"

    def __init__(self, torch: Any, core: Any, properties: Callable[[], Any],
                 mem_get_info: Callable[..., tuple[int, int]]) -> None:
        self.torch = torch
        self.core = core
        self._properties = properties  # the host's answer, made once on first use
        self._props: Any = None
        self._mem_get_info = mem_get_info
        self.memory = MemoryTable(core, self.index)

    def index(self, device: Any = None) -> int:
        """A device argument as torch.cuda takes it -> a checked index (CUDA's errors)."""
        if device is None:
            return self.core.check_index(-1)
        if isinstance(device, str):
            device = self.torch.device(device)
        if isinstance(device, self.torch.device):
            if device.type != self.device_type:
                raise ValueError(f"Expected a {self.device_type} device, but got: {device}")
            return self.core.check_index(-1 if device.index is None else device.index)
        return self.core.check_index(int(device))

    def is_available(self) -> bool:
        return self.core.device_count() > 0

    def device_count(self) -> int:
        return self.core.device_count()

    def current_device(self) -> int:
        return self.core.current_device()

    def set_device(self, device: Any) -> None:
        if isinstance(device, int) and device < 0:
            return  # torch ignores negative indices
        if isinstance(device, int) and device >= self.core.device_count():
            # cudaSetDevice answers any index past the devices, however large, with its ordinal error
            self.core.check_index(self.core.device_count())
        self.core.set_device(self.index(device))

    def exchange_device(self, index: int) -> int:
        """torch.cuda._exchange_device: set index (when >= 0), return the previous one."""
        prev = self.core.current_device()
        if index >= 0:
            self.core.set_device(index)
        return prev

    def synchronize(self, device: Any = None) -> None:
        self.index(device)  # work is done when the call that issued it returns; the index is still checked

    def device_ctx(self) -> type:
        dm = self

        class device:  # noqa: N801 - torch.cuda.device
            """`with torch.cuda.device(i):` switches the current device for the block."""

            def __init__(self, device: Any) -> None:
                self.idx = -1 if device is None or (isinstance(device, int) and device < 0) else dm.index(device)
                self.prev_idx = -1

            def __enter__(self) -> None:
                self.prev_idx = dm.core.current_device()
                if self.idx >= 0:
                    dm.core.set_device(self.idx)

            def __exit__(self, *exc: Any) -> bool:
                dm.core.set_device(self.prev_idx)
                return False

        return device

    def device_of(self, obj: Any) -> Any:
        cls = self.device_ctx()
        return cls(obj.get_device() if getattr(obj, "is_cuda", False) else -1)

    def get_device_properties(self, device: Any = None) -> Any:
        self.index(device)
        if self._props is None:
            self._props = self._properties()
        return self._props

    def get_device_name(self, device: Any = None) -> str:
        return self.get_device_properties(device).name

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        p = self.get_device_properties(device)
        return (p.major, p.minor)

    def set_sync_debug_mode(self, debug_mode: int | str) -> None:
        if isinstance(debug_mode, str):
            if debug_mode not in _SYNC_MODES:
                raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
            debug_mode = _SYNC_MODES[debug_mode]
        self.core.set_sync_debug_mode(int(debug_mode))

    def get_sync_debug_mode(self) -> int:
        return int(self.core.sync_debug_mode())

    def generators(self) -> tuple[Any, ...]:
        return tuple(self.core.default_generator(i) for i in range(self.core.device_count()))

    def table(self) -> dict[str, Any]:
        """torch.cuda attribute -> value."""
        out: dict[str, Any] = {
            "is_available": self.is_available,
            "device_count": self.device_count,
            "current_device": self.current_device,
            "set_device": self.set_device,
            "synchronize": self.synchronize,
            "_exchange_device": self.exchange_device,  # torch.cuda._DeviceGuard (Inductor's wrappers)
            "_maybe_exchange_device": self.exchange_device,
            "device": self.device_ctx(),
            "device_of": self.device_of,
            "get_device_properties": self.get_device_properties,
            "get_device_name": self.get_device_name,
            "get_device_capability": self.get_device_capability,
            "set_sync_debug_mode": self.set_sync_debug_mode,
            "get_sync_debug_mode": self.get_sync_debug_mode,
            "is_bf16_supported": lambda including_emulation=True: True,
            "is_tf32_supported": lambda: False,
            "get_arch_list": lambda: [],
            "get_gencode_flags": lambda: "",
            "init": lambda: None,
            "ipc_collect": lambda: None,
            "can_device_access_peer": lambda device, peer_device: True,  # one host memory
            "is_current_stream_capturing": lambda: False,
            "utilization": lambda device=None: 0,
        }
        out.update(self.memory.table(self._mem_get_info))
        return {k: v if isinstance(v, type) else distinct(v) for k, v in out.items()}


class _NvtxRange:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __call__(self, fn: Any) -> Any:
        return fn


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def nvtx_table() -> dict[str, Any]:
    """torch.cuda.nvtx markers: profiler annotations with no profiler to receive them."""
    return {"range_push": lambda msg: 0, "range_pop": lambda: 0, "range_start": lambda msg: 0,
            "range_end": _noop, "mark": _noop, "range": _NvtxRange}
