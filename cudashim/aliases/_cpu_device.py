"""torch.cuda's device-management, properties and RNG functions, answered for the CPU.

Devices: device_count() is CUDASHIM_CPU_DEVICES, else LOCAL_WORLD_SIZE (a launcher such as torchrun
sets it, so every rank's set_device(local_rank) is valid), else 1. All "devices" are the same
host; the current index is bookkeeping that makes set_device / current_device / torch.cuda.device
behave as CUDA code expects, and is range-checked like CUDA's.

Properties, the documented CPU answer:
  name                    "CPU (<model name from /proc/cpuinfo>)"
  major, minor            8, 0  -- an Ampere-class answer: programs choose bf16 and generic paths,
                                   never Hopper/Blackwell-only ones (sm90/sm100 kernels, FP8)
  total_memory            host memory (see _cpu_memory.mem_get_info)
  multi_processor_count   os.cpu_count()
  warp_size               32, so code that divides work by warps keeps its arithmetic
RNG: CUDA tensors are CPU tensors and draw from the CPU default generator, so torch.cuda's seeds
and states are that generator's (one generator for every "device").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import CapabilityError
from . import _cpu_memory

__all__ = [
    "CpuDeviceProperties",
    "cpu_device_count",
    "DeviceModule",
]


def cpu_device_count() -> int:
    from ..visibility import cpu_device_count as count  # CUDA_VISIBLE_DEVICES applied, bounds checked

    return count()


def _model_name() -> str:
    root = os.environ.get("CUDASHIM_SYSROOT") or "/"
    try:
        with open(os.path.join(root, "proc/cpuinfo"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown"


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
    _extra: dict = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2**20}MB, multi_processor_count={self.multi_processor_count}, "
                f"cudashim='cpu')")


def host_properties() -> CpuDeviceProperties:
    """The properties every cpu "CUDA device" reports (the alias layer's and the emulated device's)."""
    return CpuDeviceProperties(name=f"CPU ({_model_name()})", total_memory=_cpu_memory.host_total_memory(),
                               multi_processor_count=os.cpu_count() or 1)


class DeviceModule:
    """The state behind torch.cuda's device functions on cpu (one per install)."""

    def __init__(self, torch: Any, rewrite: Any) -> None:
        self.torch = torch
        self.rewrite = rewrite
        self.count = cpu_device_count()
        self.current = 0
        self._props: CpuDeviceProperties | None = None

    # -- devices -------------------------------------------------------------------------------
    def index(self, device: Any, api: str) -> int:
        if device is None:
            return self.current
        if isinstance(device, str) and device == "cpu":
            return self.current
        if isinstance(device, self.torch.device) and device.type == "cpu":
            return self.current if device.index is None else device.index
        idx = self.rewrite.index_of(device)
        if idx is None:
            if self.rewrite.is_cuda(device):
                return self.current
            raise ValueError(f"{api}: {device!r} is not a CUDA device (use an int, 'cuda:N' or torch.device('cuda', N))")
        if idx >= self.count:
            raise CapabilityError(
                f"{api}({device!r}): CUDA device {idx} does not exist on cpu: torch.cuda.device_count() is "
                f"{self.count}. Set CUDASHIM_CPU_DEVICES={idx + 1} (or more), or run under a launcher "
                f"(torchrun --nproc_per_node=N) whose LOCAL_WORLD_SIZE covers it")
        return idx

    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def current_device(self) -> int:
        return self.current

    def set_device(self, device: Any) -> None:
        if isinstance(device, int) and device < 0:
            return  # torch ignores negative indices
        self.current = self.index(device, "torch.cuda.set_device")

    def synchronize(self, device: Any = None) -> None:
        return None  # CPU work is finished when the call that queued it returns

    def device_ctx(self) -> type:
        dm = self

        class device:  # noqa: N801 - torch.cuda.device
            """`with torch.cuda.device(i):` switches the current index for the block."""

            def __init__(self, device: Any) -> None:
                self.idx = -1 if device is None or (isinstance(device, int) and device < 0) else \
                    dm.index(device, "torch.cuda.device")
                self.prev_idx = -1

            def __enter__(self) -> None:
                self.prev_idx = dm.current
                if self.idx >= 0:
                    dm.current = self.idx

            def __exit__(self, *exc: Any) -> bool:
                dm.current = self.prev_idx
                return False

        return device

    def device_of(self, obj: Any) -> Any:
        return self.device_ctx()(self.current)

    # -- properties ----------------------------------------------------------------------------
    def get_device_properties(self, device: Any = None) -> CpuDeviceProperties:
        self.index(device, "torch.cuda.get_device_properties")
        if self._props is None:
            self._props = host_properties()
        return self._props

    def get_device_name(self, device: Any = None) -> str:
        return self.get_device_properties(device).name

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        p = self.get_device_properties(device)
        return (p.major, p.minor)

    # -- RNG: the CPU default generator is every CUDA device's generator --------------------------
    def manual_seed(self, seed: int) -> None:
        self.torch.default_generator.manual_seed(int(seed))

    def seed(self) -> None:
        self.torch.default_generator.seed()

    def initial_seed(self) -> int:
        return self.torch.default_generator.initial_seed()

    def get_rng_state(self, device: Any = "cuda") -> Any:
        return self.torch.default_generator.get_state()

    def set_rng_state(self, new_state: Any, device: Any = "cuda") -> None:
        self.torch.default_generator.set_state(new_state)

    def get_rng_state_all(self) -> list[Any]:
        return [self.get_rng_state() for _ in range(self.count)]

    def set_rng_state_all(self, new_states: Any) -> None:
        for state in list(new_states)[:1]:
            self.set_rng_state(state)

    def default_generators(self) -> tuple[Any, ...]:
        return tuple(self.torch.default_generator for _ in range(max(self.count, 1)))

    # -- small answers -------------------------------------------------------------------------------
    def table(self) -> dict[str, Any]:
        """torch.cuda attribute -> replacement (data; cpu.py binds it)."""
        return {
            "is_available": self.is_available,
            "device_count": self.device_count,
            "current_device": self.current_device,
            "set_device": self.set_device,
            "synchronize": self.synchronize,
            "device": self.device_ctx(),
            "device_of": self.device_of,
            "get_device_properties": self.get_device_properties,
            "get_device_name": self.get_device_name,
            "get_device_capability": self.get_device_capability,
            "manual_seed": self.manual_seed,
            "manual_seed_all": self.manual_seed,
            "seed": self.seed,
            "seed_all": self.seed,
            "initial_seed": self.initial_seed,
            "get_rng_state": self.get_rng_state,
            "set_rng_state": self.set_rng_state,
            "get_rng_state_all": self.get_rng_state_all,
            "set_rng_state_all": self.set_rng_state_all,
            "default_generators": self.default_generators(),
            "is_bf16_supported": lambda including_emulation=True: True,
            "is_tf32_supported": lambda: False,
            "get_arch_list": lambda: [],
            "get_gencode_flags": lambda: "",
            "is_initialized": lambda: True,
            "init": lambda: None,
            "ipc_collect": lambda: None,
            "can_device_access_peer": lambda device, peer_device: True,  # one host memory
            "is_current_stream_capturing": lambda: False,
            "set_sync_debug_mode": lambda debug_mode: None,
            "get_sync_debug_mode": lambda: 0,
            "utilization": lambda device=None: 0,
        }


# torch.cuda.nvtx markers: profiler annotations with no profiler to receive them (shared with ascend)
from ._nvtx import nvtx_table  # noqa: E402


def legacy_types(torch: Any) -> Iterator[tuple[str, Any]]:
    """torch.cuda.FloatTensor & co. -> the CPU legacy types, for isinstance() and .type()."""
    for name in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
                 "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"):
        if hasattr(torch, name):
            yield name, getattr(torch, name)
