"""torch.compile on the emulated device: Inductor generates C++ (its CPU code generator) for `cuda`
tensors, never Triton.

A cuda tensor's memory is host memory, so the CPU kernels Inductor writes take its pointers as they
are. What must change is only what Inductor decides from the device name: "cuda" is dropped from
its list of GPU types (so it schedules and fuses as for the CPU), the device gets C++ scheduling and
a Python wrapper of its own (buffers are allocated on the device, kernels are called without a raw
stream), and Dynamo's CUDA interface reports no Triton-capable GPU.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["bind"]

_EMPTY_STRIDED = '''
def empty_strided_{0}(size, stride, dtype):
    return torch.empty_strided(size, stride, dtype=dtype, device="{0}")
'''


def _wrapper_class(device: str = "cuda") -> type:
    """The wrapper code generator for `device` (also the simulated NPU's, emulated/npu/compile.py)."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen

    class EmulatedWrapperCodegen(PythonWrapperCodegen):
        """The CPU's Python wrapper for device buffers: allocations on the device, no streams."""

        @staticmethod
        def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any,
                   partition_signatures: Any = None) -> Any:
            if is_subgraph:
                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return EmulatedWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.header.splice(_EMPTY_STRIDED.format(device), strip=True)

        def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, triton: bool = True,
                                         **kwargs: Any) -> Any:
            if not triton:  # a C++ kernel: called like the CPU's, with no stream argument
                self.writeline(self.wrap_kernel_call(kernel_name, call_args))
                return None
            return super()._generate_kernel_call_helper(kernel_name, call_args, triton=triton, **kwargs)

    return EmulatedWrapperCodegen


def bind(b: Any, is_active: Callable[[], bool], when_imported: Callable[[str, Callable[[Any], None]], None]) -> None:
    """Register the bindings into b (restorable bindings); each applies when its torch module loads
    (when_imported: the shim's one import hook)."""

    def inductor_utils(mod: Any) -> None:
        if is_active() and "cuda" in mod.GPU_TYPES:
            # a list Inductor's modules read in place (is_gpu()): rebinding would miss their copies
            saved = list(mod.GPU_TYPES)
            mod.GPU_TYPES.remove("cuda")
            b.bind(mod, "_cudashim_gpu_types", saved)  # restored by _restore_gpu_types on uninstall

    def compile_fx(mod: Any) -> None:
        # registered once Inductor's entry module has loaded: codegen.common itself loads in the
        # middle of Inductor's import cycle, where the C++ code generator cannot be imported yet
        if not is_active():
            return
        from torch._inductor.codegen.common import register_backend_for_device
        from torch._inductor.codegen.cpp import CppScheduling
        from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

        register_backend_for_device("cuda", CppScheduling, _wrapper_class(), CppWrapperCpu)

    def device_interface(mod: Any) -> None:
        cls = getattr(mod, "CudaInterface", None)
        if is_active() and cls is not None:
            b.bind(cls, "is_available", staticmethod(lambda: False))  # no GPU for Triton to compile for

    when_imported("torch._inductor.utils", inductor_utils)
    when_imported("torch._inductor.compile_fx", compile_fx)
    when_imported("torch._dynamo.device_interface", device_interface)


def restore_gpu_types() -> None:
    import sys

    mod = sys.modules.get("torch._inductor.utils")
    saved = getattr(mod, "_cudashim_gpu_types", None)
    if mod is not None and saved is not None and "cuda" not in mod.GPU_TYPES:
        mod.GPU_TYPES[:] = saved
