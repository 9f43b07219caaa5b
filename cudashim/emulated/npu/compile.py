"""torch.compile on the simulated NPU: Inductor's C++ code generator for `npu` tensors.

On a real host torch_npu registers its own Inductor backend for npu. The simulated NPU's memory is
host memory, so the CPU kernels Inductor writes take an npu tensor's pointers as they are: the npu
device gets C++ scheduling and the emulated device's Python wrapper (buffers allocated on npu,
kernels called without a stream). Dynamo is told the device type through torch_npu's own route,
the device module registered as torch.npu.
"""

from __future__ import annotations

from typing import Any

from ..._torch_compat import triton_tma_probe

__all__ = ["register"]


def register(torch: Any) -> None:
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    from ..compile import _wrapper_class, use_cpp_backend

    from torch._inductor.codegen.common import register_device_op_overrides
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides

    from .. import graph_kernels

    # the no-op pass keys Inductor's cache on the wrapper's code (graph_kernels.cache_key_pass): a wrapper
    # cached without the capture branch must not be loaded, or its kernels run unrecorded in an NPU graph
    register_backend_for_device("npu", CppScheduling, _wrapper_class("npu"), CppWrapperCpu,
                                device_custom_pass=graph_kernels.cache_key_pass())
    register_device_op_overrides("npu", CpuDeviceOpOverrides())
    use_cpp_backend("npu")
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device("npu", _interface(torch))
    _patch_device_supports_tma(torch)


def _patch_device_supports_tma(torch: Any) -> None:
    """As torch_npu's Inductor backend does (torch_npu/_inductor/utils.py): Triton's TMA probe asks the
    npu, not CUDA's get_device_capability() (None on npu: torch.cuda's compare would raise)."""
    import functools

    import torch.utils._triton as triton_utils

    @functools.lru_cache(None)
    def _device_supports_tma() -> bool:
        return torch.npu.is_available() and not torch.version.hip

    name = triton_tma_probe(triton_utils)
    if name is not None:
        setattr(triton_utils, name, _device_supports_tma)


def _interface(torch: Any) -> type:
    from torch._dynamo.device_interface import CpuInterface

    npu = torch.npu

    class NpuInterface(CpuInterface):
        """Dynamo's view of the simulated NPU: the CPU's, with npu's devices; no Triton."""

        @staticmethod
        def current_device() -> int:
            return npu.current_device()

        @staticmethod
        def set_device(device: Any) -> None:
            npu.set_device(device)

        @staticmethod
        def device_count() -> int:
            return npu.device_count()

        @staticmethod
        def is_triton_capable(device: Any = None) -> bool:
            return False

        @staticmethod
        def raise_if_triton_unavailable(device: Any = None) -> None:
            raise RuntimeError("the simulated NPU compiles C++ kernels, not Triton")

    return NpuInterface
