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
import hashlib
import os
import threading
from typing import Any, Callable

from . import flex_decompose, graph_kernels

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
# the device's C++ kernels take the memory Triton's autotuning takes at their first launch (autotune_once)
_AUTOTUNE = '''
from cudashim.emulated.compile import autotune_once as _cudashim_autotune_once
_cudashim_tuned = _cudashim_autotune_once.tuned
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
                mutated = getattr(self, "_cudashim_autotuned", {}).get(kernel_name)  # argument positions
                key = getattr(self, "_cudashim_kernel_keys", {}).get(kernel_name)
                if device == "cuda" and mutated is not None and key is not None:
                    names = "".join(f"{call_args[i]}, " for i in mutated)
                    self.writeline(f"if {key!r} not in _cudashim_tuned: _cudashim_autotune_once("  # type: ignore[attr-defined]
                                   f"{key!r}, ({names}))")
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
            if device == "cuda":
                self.header.splice(_AUTOTUNE, strip=True)

    return EmulatedWrapperCodegen


def _scheduling_class() -> type:
    """The C++ scheduling of the device: as the CPU's, and each kernel call tells the wrapper which of
    its arguments the kernel mutates (what Triton's autotuning clones, autotune_once)."""
    from torch._inductor.codegen.cpp import CppScheduling, KernelGroup

    class MutationsKernelGroup(KernelGroup):
        def call_kernel(self, wrapper: Any, kernel_name: str) -> None:
            # read when the wrapper writes the call, which can be after this returns (its lines are
            # generated at the end); a kernel (one name, one signature) can be called from several places,
            # so its mutated arguments are kept as positions in its call arguments
            if _autotunes(self):
                if not hasattr(wrapper, "_cudashim_autotuned"):
                    wrapper._cudashim_autotuned = {}
                _, call_args, _ = self.args.cpp_argdefs()
                # a name once per argument Triton lists it under (an input and an output of one buffer
                # are two arguments, cloned each)
                positions: list[int] = []
                for m in _mutated_args(self):
                    at = [i for i, a in enumerate(call_args) if a == m and i not in positions]
                    if at:
                        positions.append(at[0])
                wrapper._cudashim_autotuned[kernel_name] = positions
            super().call_kernel(wrapper, kernel_name)

    class EmulatedCppScheduling(CppScheduling):
        def reset_kernel_group(self) -> None:
            self.kernel_group = MutationsKernelGroup()

        def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
            name = super().define_kernel(src_code, nodes, kernel_args)
            # what Inductor's autotune cache keys a kernel's tuned config on: its source (and name)
            from torch._inductor.virtualized import V

            keys = V.graph.wrapper_code.__dict__.setdefault("_cudashim_kernel_keys", {})
            keys[name] = hashlib.sha256(f"{name}\n{src_code}".encode()).hexdigest()[:32]
            return name

    return EmulatedCppScheduling


def _autotunes(group: Any) -> bool:
    """Whether Inductor's Triton kernel for these nodes has more than one config, so autotunes, as
    triton_heuristics chooses them outside max-autotune: a pointwise kernel has two while
    triton.autotune_pointwise is on (the default). A reduction, by the nodes' one hint
    (SIMDKernelFeatures.get_reduction_hint): OUTER or OUTER_TINY, one; INNER over 256 elements or more,
    one (a looped reduction's contiguous config, a persistent one's first), two for a looped one that
    reads its input more than once over 2048 to 32768 elements; otherwise a persistent
    reduction (up to 1024 elements) has one config per XBLOCK of 1, 8, 32, 128 that fits its rows and
    4096 elements, so one below 8 rows, and a looped reduction several."""
    from torch._inductor import config
    from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
    from torch._inductor.runtime.hints import ReductionHint

    if config.max_autotune or config.max_autotune_pointwise:
        return True
    nodes = [n for group_node in group.scheduled_nodes for n in group_node.get_nodes()]
    reductions = [n for n in nodes if n.is_reduction()]
    if not reductions:
        return bool(config.triton.autotune_pointwise)
    hints = {SIMDKernelFeatures.reduction_hint(n) for n in reductions}
    hint = hints.pop() if len(hints) == 1 else ReductionHint.DEFAULT
    if hint in (ReductionHint.OUTER, ReductionHint.OUTER_TINY):
        return False
    rnumel = max(_hint(n.node.get_reduction_size()) for n in reductions)
    xnumel = max(_hint(n.node.get_size()) for n in reductions)
    if hint == ReductionHint.INNER and rnumel >= 256:
        # a looped reduction over 2048 to 32768 elements that reads its input more than once (more than
        # one reduction: softmax, log-softmax) gets a persistent config added (add_persistent_rblock)
        return 2048 < rnumel <= 32768 and len(reductions) > 1
    if rnumel <= 1024:  # persistent
        return xnumel >= 8 and rnumel * 8 <= 4096
    return True


def _hint(sizes: Any) -> int:
    from torch._inductor.virtualized import V

    n = 1
    for s in sizes:
        n *= int(V.graph.sizevars.optimization_hint(s))
    return n


def _mutated_args(group: Any) -> list[str]:
    """The wrapper's names of the buffers a kernel mutates, as Triton's code generator lists its
    mutated_arg_names: the buffers it reuses in place (the scheduler marks both names mutated) and
    those its nodes' outputs mutate that are its inputs or outputs, a buffer that is both once as each
    (TritonKernel.codegen_kernel adds its input and its output argument)."""
    from torch._inductor.codegen.common import RemovedArg

    mutations: dict[str, None] = {}
    for node in group.scheduled_nodes:
        for buf in node.get_outputs():
            mutations.update(dict.fromkeys(buf.get_mutations()))
    args, out = group.args, []
    for inplaced in args.inplace_buffers.values():  # reused in place: Triton's scheduler marks both names mutated
        if not isinstance(inplaced, RemovedArg) and inplaced.other_names[-1] not in out:
            out.append(inplaced.other_names[-1])
    for name in mutations:
        inplaced = args.inplace_buffers.get(name)
        if inplaced is not None and not isinstance(inplaced, RemovedArg):
            if inplaced.other_names[-1] not in out:
                out.append(inplaced.other_names[-1])
            continue
        if name in args.input_buffers:
            out.append(name)
        if name in args.output_buffers and not isinstance(args.output_buffers[name], RemovedArg):
            out.append(name)
    return out


class _AutotuneOnce:
    """What a GPU allocates where Inductor's Triton kernel for this C++ kernel autotunes: at the
    kernel's first launch in the process, unless Inductor's autotune cache on disk holds its tuned
    config (a kernel of the same source tuned by an earlier process or compiled module),
    CachingAutotuner.run benchmarks each of its configs (bench); for each, the arguments the kernel
    mutates are cloned for every launch unless the clone would raise the peak allocated memory
    (copy_args_to_cpu_if_needed: then they are copied to the host), and
    InductorBenchmarker.benchmark_gpu, after a first launch, allocates an int32 buffer of the device's
    L2 cache size to flush the cache between launches and frees it at the end. Here the device makes the
    same allocations, in that order, through its allocator: on a profiled device only (its statistics are
    then CUDA's), not while a graph is captured (where CUDA would not benchmark). The tuned kernels are
    marked in Inductor's cache directory, as the tuned configs are on a GPU."""

    CONFIGS = 2  # a pointwise kernel's two configs (bs and bs // 2); reductions have more, same allocations

    def __init__(self) -> None:
        self.tuned: set[str] = set()  # kernel keys seen by this process

    def __call__(self, key: str, mutated: tuple[Any, ...]) -> None:
        import torch

        self.tuned.add(key)
        marker = os.path.join(_markers(), key)
        if os.path.exists(marker):
            return
        try:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            open(marker, "w").close()
        except OSError:
            pass  # a read-only cache: the next process tunes again, as a GPU's would
        from ._build import load

        if not load("CUDA").model_active() or torch.cuda.is_current_stream_capturing():
            return
        device = mutated[0].device if mutated else torch.device("cuda", torch.cuda.current_device())
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
        tensors = [t for t in mutated if isinstance(t, torch.Tensor)]
        for _ in range(self.CONFIGS):
            budget = torch.cuda.max_memory_allocated(device) - torch.cuda.memory_allocated(device)
            clone: list[int] = []
            for t in tensors:
                size = _storage_bytes(t)
                if size <= budget:
                    budget -= size
                    clone.append(size)
            copies = [torch.empty(n, dtype=torch.uint8, device=device) for n in clone]
            del copies  # the first launch's clones (clone_preserve_strides), freed with it
            buffer = torch.empty(l2 // 4, dtype=torch.int, device=device) if l2 >= 4 else None
            copies = [torch.empty(n, dtype=torch.uint8, device=device) for n in clone]
            del copies, buffer  # each timed launch's clones, then the flush buffer


def _storage_bytes(t: Any) -> int:
    """compute_required_storage_length(size, stride, 0) * element_size: the elements a view spans."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(t.size(), t.stride()))) * t.element_size()


def _markers() -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return os.path.join(cache_dir(), "cudashim-autotuned")


autotune_once = _AutotuneOnce()


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
        from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

        # the pass keys Inductor's cache on this wrapper's code (graph_kernels.cache_key_pass) and makes
        # compiled flex attention trainable (flex_decompose.py)
        register_backend_for_device("cuda", _scheduling_class(), _wrapper_class(), CppWrapperCpu,
                                    device_custom_pass=graph_kernels.cache_key_pass(flex_decompose.decompose_flex,
                                                                                    flex_decompose.__file__))
        use_cpp_backend()

    def device_interface(mod: Any) -> None:
        cls = getattr(mod, "CudaInterface", None)
        if is_active() and cls is not None:
            b.bind(cls, "is_available", staticmethod(lambda: False))  # no GPU for Triton to compile for

    def dynamo_streams(mod: Any) -> None:
        if is_active():
            _lazy_current_stream(b, mod, is_active)

    def flex_lowering(mod: Any) -> None:
        if is_active():
            _lower_flex_on_host()

    def scheduler(mod: Any) -> None:
        if is_active():
            _partition_for_graphs(b, mod)

    def lowering(mod: Any) -> None:
        if is_active():
            _variance_as_the_cpu(b, mod)

    when_imported("torch._inductor.lowering", lowering)
    when_imported("torch._inductor.kernel.flex.flex_attention", flex_lowering)
    when_imported("torch._inductor.scheduler", scheduler)
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


def _variance_as_the_cpu(b: Any, mod: Any) -> None:
    """var/var_mean (LayerNorm's statistics) lowered as for the CPU: in two passes below the CPU's size
    threshold, Welford's otherwise. Lowered as for CUDA (Welford's always, where Triton would run) the
    device's compiled training steps round differently from the same program compiled for the CPU."""
    from torch._inductor import config

    original = mod.use_two_step_variance

    def use_two_step_variance(x: Any, *args: Any, **kwargs: Any) -> Any:
        device = x.get_device()
        if device is not None and device.type != "cpu" and device.type in _HOST_TYPES:
            # the threshold a device that is neither the CPU nor Triton's gets, set to the CPU's
            with config.patch(unroll_reductions_threshold=config.cpp.use_two_step_variance_threshold):
                return original(x, *args, **kwargs)
        return original(x, *args, **kwargs)

    b.bind(mod, "use_two_step_variance", use_two_step_variance)


_asking_partition = threading.local()


def _partition_for_graphs(b: Any, mod: Any) -> None:
    """CUDA graphs (mode="reduce-overhead") wrap the partitions of a compiled graph that hold GPU work;
    Inductor asks each node is_gpu(), which the cuda device answers no (its kernels are C++, scheduled as
    the CPU's). Asked by the partitioner, a node on the device answers yes: its calls are recorded and
    replayed by the device's graphs, as a GPU's kernels are by CUDA's."""
    should_partition, is_gpu = mod.Scheduler.should_partition, mod.BaseSchedulerNode.is_gpu

    def partition(self: Any, node: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_asking_partition, "on", False)
        _asking_partition.on = True
        try:
            return should_partition(self, node, *args, **kwargs)
        finally:
            _asking_partition.on = outer

    def node_is_gpu(self: Any) -> bool:
        if getattr(_asking_partition, "on", False):
            device = self.get_device()
            if device is not None and device.type == "cuda":
                return True
        return is_gpu(self)

    b.bind(mod.Scheduler, "should_partition", partition)
    b.bind(mod.BaseSchedulerNode, "is_gpu", node_is_gpu)


_saved_flex: list[tuple[Any, Any]] = []


def _lower_flex_on_host() -> None:
    """flex_attention on the device's tensors lowers to Inductor's C++ template (the CPU's), not the
    Triton one, which needs a GPU. The C++ template computes the attention only, as on the CPU: on the
    cuda device a graph that uses the log-sum-exp (a backward through it, return_lse / return_aux) never
    gets here (flex_decompose.py inlines the dense implementation first); where another device's graph
    does, the lowering refuses with a CapabilityError naming the ways out; where nothing reads it (grad
    mode on but no input requires grad), it is not computed."""
    import torch
    from torch._inductor import lowering

    hop = torch.ops.higher_order.flex_attention
    original = lowering.lowerings.get(hop)
    if original is None or _saved_flex:
        return

    def flex_attention(*args: Any, **kwargs: Any) -> Any:
        device = args[0].get_device()
        if device is None or device.type == "cpu" or device.type not in _HOST_TYPES:
            return original(*args, **kwargs)
        from torch._inductor.kernel.flex.flex_cpu import lower_cpu

        options = dict(args[6])
        if options.get("OUTPUT_LOGSUMEXP") or options.get("OUTPUT_MAX"):
            if _aux_outputs_read():
                from ..errors import CapabilityError

                raise CapabilityError(
                    f"torch.compile of flex_attention on the emulated {device.type} device: Inductor's C++ "
                    "template (the CPU's) computes no log-sum-exp or max scores, so no backward through the "
                    "compiled attention and no return_lse / return_aux; run flex_attention without compiling "
                    "it (eager), or use scaled_dot_product_attention, or run under torch.no_grad() for "
                    "inference [capability triton_kernels]")
            options["OUTPUT_LOGSUMEXP"] = options["OUTPUT_MAX"] = False
        return lower_cpu(*args[:6], options, *args[7:], **kwargs)

    lowering.lowerings[hop] = flex_attention
    _saved_flex.append((hop, original))


def _aux_outputs_read() -> bool:
    """Whether the flex_attention node being lowered has its log-sum-exp or max read (getitem 1, 2)."""
    import operator

    from torch._inductor.virtualized import V

    node = V.graph.current_node
    return any(u.target is operator.getitem and u.args[1] != 0 for u in node.users)


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
    lowering = sys.modules.get("torch._inductor.lowering")
    while _saved_flex and lowering is not None:
        hop, original = _saved_flex.pop()
        lowering.lowerings[hop] = original
    mod = sys.modules.get("torch._inductor.utils")
    saved = getattr(mod, "_cudashim_gpu_types", None)
    if mod is not None and saved is not None and "cuda" not in mod.GPU_TYPES:
        mod.GPU_TYPES[:] = saved
