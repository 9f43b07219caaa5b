"""torch.compile on the emulated device: Inductor generates C++ (its CPU code generator) for `cuda`
tensors, never Triton.

A cuda tensor's memory is host memory, so the CPU kernels Inductor writes take its pointers as they
are. What must change is only what Inductor decides from the device name: "cuda" is dropped from
its list of GPU types (so it schedules and fuses as for the CPU), the device gets C++ scheduling and
a Python wrapper of its own (buffers are allocated on the device, kernels are called without a raw
stream), and Dynamo's CUDA interface reports no Triton-capable GPU.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

from . import graph_kernels

__all__ = ["bind", "empty_strided"]

# buffers straight from the core (C, like CUDA's own empty_strided_cuda): a wrapper allocates many per call
_EMPTY_STRIDED = '''
from cudashim.emulated.compile import empty_strided as _cudashim_empty_strided
empty_strided_{0} = _cudashim_empty_strided("{0}")
'''
# the device's C++ kernel calls ask this first: inside a graph capture they go through a
# recordable operator (graph_kernels.py)
_CAPTURE = '''
from cudashim.emulated import graph_kernels as _cudashim_graph_kernels
_cudashim_capturing = _cudashim_graph_kernels.capture_check()
_cudashim_graph_kernel = _cudashim_graph_kernels.launch
'''


def empty_strided(device: str) -> Callable[..., Any]:
    """The core's empty_strided(size, stride, dtype) for `device` ("cuda", or the simulated "npu"): a
    buffer of the current device, as Inductor's wrapper asks for it."""
    from ._build import load

    return load("CUDA" if device == "cuda" else "PrivateUse1").empty_strided


def _wrapper_class(device: str = "cuda") -> type:
    """The wrapper code generator for `device` (also the simulated NPU's, emulated/npu/compile.py).
    C++ kernel calls on the device are recorded by a graph capture (graph_kernels.py): a CUDA graph on
    cuda, an NPU graph on the simulated NPU."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
    from torch._inductor.virtualized import V

    recordable = True

    class KernelCalls:
        def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, triton: bool = True,
                                         **kwargs: Any) -> Any:
            if triton:
                return super()._generate_kernel_call_helper(kernel_name, call_args, triton=triton,  # type: ignore[misc]
                                                            **kwargs)
            # a C++ kernel: called like the CPU's, with no stream argument
            call = self.wrap_kernel_call(kernel_name, call_args)  # type: ignore[attr-defined]
            on = kwargs.get("device") or V.graph.get_current_device_or_throw()
            if recordable and on.type == device:  # CPU work is not captured (it runs at once, as on CUDA)
                kind = graph_kernels.kinds(kwargs.get("arg_types"), len(call_args))
                self.writeline(f"if _cudashim_capturing(): _cudashim_graph_kernel({kernel_name}, {kind!r}, "  # type: ignore[attr-defined]
                               f"{', '.join(map(str, call_args))})")
                self.writeline(f"else: {call}")  # type: ignore[attr-defined]
            else:
                self.writeline(call)  # type: ignore[attr-defined]
            return None

    class EmulatedSubgraphWrapperCodegen(KernelCalls, SubgraphPythonWrapperCodegen):
        """A subgraph's wrapper (control flow operators): the same kernel calls."""

    class EmulatedWrapperCodegen(KernelCalls, PythonWrapperCodegen):
        """The CPU's Python wrapper for device buffers: allocations on the device, no streams."""

        @staticmethod
        def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any,
                   partition_signatures: Any = None) -> Any:
            if is_subgraph:
                return EmulatedSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return EmulatedWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.header.splice(_EMPTY_STRIDED.format(device), strip=True)
            if recordable:
                self.header.splice(_CAPTURE, strip=True)

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

        # the no-op pass keys Inductor's cache on this wrapper's code (graph_kernels.cache_key_pass)
        register_backend_for_device("cuda", CppScheduling, _wrapper_class(), CppWrapperCpu,
                                    device_custom_pass=graph_kernels.cache_key_pass())
        use_cpp_backend()

    def device_interface(mod: Any) -> None:
        cls = getattr(mod, "CudaInterface", None)
        if is_active() and cls is not None:
            b.bind(cls, "is_available", staticmethod(lambda: False))  # no GPU for Triton to compile for

    def dynamo_streams(mod: Any) -> None:
        if is_active():
            _lazy_current_stream(b, mod, is_active)

    when_imported("torch._inductor.utils", inductor_utils)
    when_imported("torch._inductor.compile_fx", compile_fx)
    when_imported("torch._dynamo.device_interface", device_interface)
    when_imported("torch._dynamo.variables.streams", dynamo_streams)


def _lazy_current_stream(b: Any, mod: Any, is_active: Callable[[], bool]) -> None:
    """Dynamo registers the accelerator's current stream at the start of every trace, so every call of
    every compiled frame first runs bytecode that fetches it again (a profiler hook, the stream, a weak
    reference, a call with Dynamo disabled), used or not: on the device, whose work is the host's CPU
    time, that is a cost on every compiled call. Here the stream is registered when a trace first asks for
    it (torch.cuda.current_stream(), a stream context), as Dynamo's own start-up code would; a trace
    that never does compiles no such bytecode. Where another stream object was registered first (a
    stream made inside the compiled code), the current stream cannot take index 0 as Dynamo expects:
    that trace asks for it and graph-breaks instead."""
    cls = mod.SymbolicStreamState
    init, cur_stream = cls.__init__, cls.cur_stream

    def lazy_init(self: Any) -> None:
        if not is_active():
            init(self)
            return
        mod.reset_user_object_tracking()  # as Dynamo's: the registry starts empty for every trace
        self.cur_stream_stack = collections.deque()

    def lazy_cur_stream(self: Any, device: Any = None) -> Any:
        if not self.cur_stream_stack and is_active():
            self.cur_stream_stack.extend(_registered_current_stream(mod))
        return cur_stream(self, device)

    b.bind(cls, "__init__", lazy_init)
    b.bind(cls, "cur_stream", lazy_cur_stream)


def _registered_current_stream(mod: Any) -> list[Any]:
    """Dynamo's start-up registration of the current stream (SymbolicStreamState.__init__), done now:
    [its variable], or [] where index 0 is taken (cur_stream then fails and the caller graph-breaks)."""
    import torch

    from torch._dynamo.graph_bytecode_inputs import index_to_bytecode_constructor

    if index_to_bytecode_constructor:
        return []
    stream = torch.accelerator.current_stream()
    source = mod.CurrentStreamSource(stream.device)
    index = mod.register_user_object(stream, source)
    var = mod.LazyVariableTracker.create(stream, source=source)
    var.user_object_index = index
    return [var]


def use_cpp_backend(device: str = "cuda") -> None:
    """Tell Inductor the emulated devices' kernels are C++: get_current_backend() answers
    config.cuda_backend for every device type but cpu/mps/xpu (cuda and npu alike), and with "triton"
    its dtype propagation computes bf16/fp16 in float32 (upcast_compute_type) as Triton's loads do,
    so the C++ kernels stored float vectors into bf16 buffers: twice the bytes, a corrupted heap."""
    from torch._inductor import config, scheduler

    if config.cuda_backend != "cpp":
        _saved_backend.append(config.cuda_backend)
        config.cuda_backend = "cpp"
    # torch.cat as the CPU lowers it (a copy into each slice of one buffer): the GPU's pointwise cat
    # (every output element picks its input by index) is what the C++ code generator cannot vectorize,
    # a scalar loop in nano-vllm's rotary embedding. Only CPU tensors skip these limits, and on a
    # host without a GPU every other device is an emulated one.
    if not _saved_cat:
        _saved_cat.append((config.max_pointwise_cat_inputs, config.max_complex_pointwise_cat_inputs))
        config.max_pointwise_cat_inputs = config.max_complex_pointwise_cat_inputs = 0
    _HOST_TYPES.add(device)
    if scheduler.BaseSchedulerNode.is_cpu is not _is_cpu:
        # the scheduler's CPU-only decisions (no loop reindexing across a reduction, CPU fusion rules)
        # hold for host-memory devices: their nodes are compiled by the same C++ code generator
        _saved_is_cpu.append(scheduler.BaseSchedulerNode.is_cpu)
        scheduler.BaseSchedulerNode.is_cpu = _is_cpu


_HOST_TYPES = {"cpu"}
_saved_is_cpu: list[Any] = []


def _is_cpu(self: Any) -> bool:
    device = self.get_device()
    return device is not None and device.type in _HOST_TYPES


_saved_backend: list[str] = []
_saved_cat: list[tuple[int, int]] = []


def restore_gpu_types() -> None:
    import sys

    config = sys.modules.get("torch._inductor.config")  # set only once it was imported
    if _saved_backend:
        config.cuda_backend = _saved_backend.pop()
    if _saved_cat:
        config.max_pointwise_cat_inputs, config.max_complex_pointwise_cat_inputs = _saved_cat.pop()
    if _saved_is_cpu:
        sys.modules["torch._inductor.scheduler"].BaseSchedulerNode.is_cpu = _saved_is_cpu.pop()
    _HOST_TYPES.discard("cuda")
    mod = sys.modules.get("torch._inductor.utils")
    saved = getattr(mod, "_cudashim_gpu_types", None)
    if mod is not None and saved is not None and "cuda" not in mod.GPU_TYPES:
        mod.GPU_TYPES[:] = saved
