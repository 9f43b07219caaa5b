"""A Triton driver for the emulated device (`triton.runtime.driver.active`).

Triton picks its driver from the backends whose driver says it is active; on the emulated device CUDA
looks available, so the CUDA driver is picked and fails looking for libcuda.so. This one answers from
the device itself: the current device and stream are torch's (the device's), the target is the CUDA
target of the device's compute capability (or of its --profile), and utils.get_device_properties()
reads torch.cuda.get_device_properties (so a profile's SM count and shared memory are what a
program sizing its grid sees). Nothing here compiles or launches: JITFunction.run goes to launch.py.

Autotuning: timing the interpreter says nothing about the GPU the program was written for, so the
benchmarker runs no configuration and gives every one the same time; Triton's autotuner then keeps
the first configuration of the (pruned) list, always the same one. The autotuner's own hooks still
apply as on a GPU: reset_to_zero after tuning, a config's pre_hook before the launch, and
restore_value, which only ever undoes benchmark runs, has none to undo.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EmulatedDriver", "benchmark", "benchmarked", "BENCHMARK_RULE"]

BENCHMARK_RULE = "autotuning takes the first configuration of each pruned list (nothing is timed on the emulated device)"
_benchmarked = [0]


def benchmarked() -> int:
    """How many configurations the autotuner asked to time (none was run)."""
    return _benchmarked[0]


def benchmark(kernel_call: Any, *args: Any, quantiles: Any = None, return_mode: str = "mean", **kwargs: Any) -> Any:
    """Triton's benchmarker interface: every configuration takes the same (zero) time, none runs."""
    _benchmarked[0] += 1
    if quantiles is not None:
        return [0.0 for _ in quantiles]
    return 0.0


class _Utils:
    """driver.active.utils: what Triton's CudaUtils answers that a program reads."""

    def __init__(self, device_module: Any) -> None:
        self._dev = device_module

    def get_device_properties(self, device: Any = None) -> dict[str, Any]:
        p = self._dev.get_device_properties(self._dev.current_device() if device is None else device)
        optin = getattr(p, "shared_memory_per_block_optin", 0) or getattr(p, "shared_memory_per_block", 49152)
        return {
            "max_shared_mem": int(optin),
            "max_num_regs": int(getattr(p, "regs_per_multiprocessor", 65536)),
            "multiprocessor_count": int(p.multi_processor_count),
            "warpSize": int(getattr(p, "warp_size", 32)),
            "sm_clock_rate": int(getattr(p, "clock_rate", 0)),
            "mem_clock_rate": int(getattr(p, "memory_clock_rate", 0)),
            "mem_bus_width": int(getattr(p, "memory_bus_width", 0)),
        }

    def get_current_device(self) -> int:
        return int(self._dev.current_device())

    def set_current_device(self, device: int) -> None:
        self._dev.set_device(device)

    def get_device_capability(self, device: int) -> tuple[int, int]:
        return tuple(self._dev.get_device_capability(device))  # type: ignore[return-value]

    def is_stream_capturing(self, *args: Any) -> bool:
        return bool(self._dev.is_current_stream_capturing())

    def __getattr__(self, name: str) -> Any:
        from ..errors import CapabilityError

        raise CapabilityError(f"triton.runtime.driver.active.utils.{name}: the emulated device has no CUDA driver "
                              "library to load modules or launch binaries from [capability triton_kernels]; Triton "
                              "kernels run through the shim's launch (kernel[grid](...)), not through the driver")


class EmulatedDriver:
    """Answers what Triton and programs ask `driver.active` on the emulated device ("cuda" on cpu,
    "npu" on the simulated NPU)."""

    def __init__(self, device_type: str = "cuda", target_backend: str = "cuda") -> None:
        import torch

        self.device_type = device_type
        self._backend = target_backend
        self._dev = getattr(torch, device_type)
        self.utils = _Utils(self._dev)

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_device(self) -> int:
        return int(self._dev.current_device())

    def set_current_device(self, device: int) -> None:
        self._dev.set_device(device)

    def get_current_stream(self, device: Any = None) -> int:
        stream = self._dev.current_stream(device)
        return int(getattr(stream, "cuda_stream", getattr(stream, "npu_stream", 0)) or 0)

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        return tuple(self._dev.get_device_capability(device))  # type: ignore[return-value]

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        if self._backend == "cuda":
            major, minor = self.get_device_capability(self.get_current_device())
            return GPUTarget("cuda", major * 10 + minor, 32)
        name = getattr(self._dev.get_device_properties(self.get_current_device()), "name", self._backend)
        return GPUTarget(self._backend, str(name), 0)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device(self.device_type, self.get_current_device())

    def get_device_interface(self) -> Any:
        return self._dev

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_benchmarker(self) -> Any:
        return benchmark

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(0, dtype=torch.int8, device=self.device_type)

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()

    def __repr__(self) -> str:
        return f"EmulatedDriver({self.device_type!r})"
