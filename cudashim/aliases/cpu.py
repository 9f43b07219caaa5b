"""The cpu alias layer: CUDA-written PyTorch code addresses the CPU, unchanged.

install() runs right after `import torch` (the import hook calls it through cudashim.aliases); it
binds, and uninstall() restores every original exactly. Semantics (DESIGN.md section 5):

* torch.cuda is a device module for the CPU: is_available() is True, device_count() is
  CUDASHIM_CPU_DEVICES / LOCAL_WORLD_SIZE / 1, streams and events work (events time with the host
  clock), memory queries describe this process and the host (see _cpu_memory), properties are the
  documented CPU answer (see _cpu_device).
* CUDA tensors are CPU tensors: device="cuda", "cuda:N", torch.device("cuda", N) and int indices
  land on the CPU in every factory torch itself lists (torch.utils._device._device_constructors()
  and the *_like family), Tensor.to/cuda/new_*, Module.to/cuda/to_empty, torch.load's map_location,
  torch.set_default_device and `with torch.device("cuda")`, torch.Generator(device="cuda").
  `t.device.type` is "cpu" (torch.device objects cannot be faked); `t.is_cuda` is True for CPU
  tensors ("on the target device"), and `t.get_device()` is the current CUDA index.
* Pinned memory is a no-op: pin_memory=True is dropped, .pin_memory() returns the tensor.
* Autocast: device_type "cuda" becomes "cpu"; an explicit dtype is honoured (float16 and bfloat16
  both run under CPU autocast); without one the CPU default applies (bfloat16): the same result
  as the code written for the CPU, and the CPU's fast reduced-precision type. GradScaler("cuda")
  is a CPU GradScaler.
* Distributed: "nccl" is "gloo" (also in "cpu:gloo,cuda:nccl"), device ids are dropped (Gloo and
  CPU DDP/FSDP take none), DeviceMesh("cuda") is a CPU mesh. dist.get_backend() answers "gloo".
* torch.compile: tensors are CPU tensors, so Inductor generates C++; Triton is never chosen. Dynamo
  records the wrapped tensor methods as the methods they are, without a graph break (_cpu_compile).
* Loud limits (CapabilityError at construction / first call): CUDA graphs, symmetric memory,
  CUDA C++ extensions, Triton launches no patch replaced.

Why wrappers and not a TorchFunctionMode: a mode runs Python on every torch call of the program,
wrappers only on the calls that take a device; and modes interfere with torch.compile tracing.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import _state, envs
from . import _cpu_compile, _cpu_device, _cpu_limits, _cpu_memory, _cpu_streams, _cpu_torch, probes
from ._common import (
    Bindings,
    DeviceRewriter,
    cuda_device_given,
    discover_factories,
    when_imported,
    wrap_factory,
)
from ._distributed import bind_distributed

__all__ = ["install", "uninstall", "installed", "rewriter"]

_bindings = Bindings()
_rewrite: DeviceRewriter | None = None
_device: Any = None  # the emulated device's module when CUDASHIM_CPU_BACKEND=device
_POSITIONAL_DEVICE: dict[str, int] = {}  # factories whose device may come positionally (none in torch 2.13)

_MEMORY = ("mem_get_info", "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
           "reset_accumulated_memory_stats", "empty_cache", "memory_summary", "memory_snapshot",
           "set_per_process_memory_fraction")
# torch.Tensor methods replaced by wrappers of the same name (torch.compile records them as methods)
_TENSOR_METHODS = ("to", "cuda", "pin_memory", "get_device", "record_stream", "type", "new_empty", "new_zeros",
                   "new_ones", "new_full", "new_tensor", "new_empty_strided")
_STREAMS = ("Stream", "ExternalStream", "Event", "StreamContext", "stream", "current_stream", "default_stream",
            "set_stream")


def installed() -> bool:
    return _rewrite is not None or _device is not None


def _install_device(torch: Any) -> Any:
    """cuda:N tensors of the emulated device (cudashim.emulated): no argument is rewritten."""
    from .. import emulated

    real_is_available = torch.cuda.is_available  # library probes see the truth (DESIGN.md section 5)
    dm = emulated.install(_bindings, when_imported=when_imported, alias_class=_cpu_torch.alias_class,
                          properties=_cpu_device.host_properties, mem_get_info=_cpu_memory.mem_get_info)
    dm.core.set_device_count(_cpu_device.cpu_device_count())
    for name, value in _cpu_device.nvtx_table().items():
        _bindings.bind(torch.cuda.nvtx, name, value, f"torch.cuda.nvtx.{name}", "emulated")
    # NCCL is Gloo; the core hands Gloo CPU views of cuda tensors (emulated.distributed)
    bind_distributed(_bindings, torch, {"nccl": "gloo"}, device_id=lambda d: None, device_ids=lambda ids: None,
                     device_type=lambda t: t, is_active=installed)
    probes.install("cpu", real_is_available)
    subs = [m for n, m in list(sys.modules.items()) if n.startswith("torch.cuda.") and m is not None]
    for name, value in _cpu_limits.LIMIT_TABLE.items():
        _bind_cuda(torch, name, value, "unsupported", subs)
    _bind_lazy_limits()
    return dm


def rewriter() -> DeviceRewriter | None:
    """The active "cuda" -> cpu device rewriter (None when not installed)."""
    return _rewrite


def _bind_cuda(torch: Any, name: str, value: Any, treatment: str, submodules: list[Any]) -> None:
    # bound on torch.cuda and on every torch.cuda.* submodule holding the same original, so
    # `from torch.cuda.memory import memory_allocated` sees the alias too
    cuda = torch.cuda
    orig = getattr(cuda, name, None)
    _bindings.bind(cuda, name, value, f"torch.cuda.{name}", treatment)
    if orig is None:
        return
    for mod in submodules:
        if getattr(mod, name, None) is orig:
            _bindings.bind(mod, name, value)


def install() -> None:
    """Alias torch.cuda to the CPU, or make it the emulated device (idempotent)."""
    global _rewrite, _device
    if _rewrite is not None or _device is not None:
        return
    import torch

    if envs.get("CUDASHIM_CPU_BACKEND") == "device":
        try:
            _device = _install_device(torch)
        except BaseException:
            uninstall()
            raise
        return

    none = _cpu_device.cpu_device_count() == 0
    rw = DeviceRewriter(torch, "cpu", keep_index=False, refuse=(
        "No CUDA GPUs are available (cpu platform: CUDA_VISIBLE_DEVICES hides every emulated device, "
        "or CUDASHIM_CPU_DEVICES=0); unset it or name a device, e.g. CUDA_VISIBLE_DEVICES=0") if none else None)
    _rewrite = rw
    try:
        _install(torch, rw)
    except BaseException:
        uninstall()
        raise


def _install(torch: Any, rw: DeviceRewriter) -> None:
    b = _bindings
    dm = _cpu_device.DeviceModule(torch, rw)
    probes.install("cpu", torch.cuda.is_available)  # the shared probe table (TileLang's target detection...)
    _cpu_compile.bind(b, torch, _TENSOR_METHODS, lambda: dm.current, torch.cuda.is_available, installed)

    # torch.cuda as a CPU device module
    subs = [m for n, m in list(sys.modules.items()) if n.startswith("torch.cuda.") and m is not None]
    for name, value in dm.table().items():
        _bind_cuda(torch, name, value, "emulated", subs)
    for name in _MEMORY:
        _bind_cuda(torch, name, getattr(_cpu_memory, name), "emulated", subs)
    for name in _STREAMS:
        _bind_cuda(torch, name, getattr(_cpu_streams, name), "emulated", subs)
    for name, value in _cpu_limits.LIMIT_TABLE.items():
        _bind_cuda(torch, name, value, "unsupported", subs)
    for name, value in _cpu_device.legacy_types(torch):
        _bind_cuda(torch, name, value, "aliased", subs)
    for name, value in _cpu_device.nvtx_table().items():
        b.bind(torch.cuda.nvtx, name, value, f"torch.cuda.nvtx.{name}", "emulated")

    # factories, discovered from torch
    for ns, name in discover_factories(torch):
        fn = getattr(ns, name)
        b.bind(ns, name, wrap_factory(fn, rw, positional=_POSITIONAL_DEVICE.get(name)),
               f"{ns.__name__}.{name}(device='cuda')", "aliased",
               when=cuda_device_given(rw, _POSITIONAL_DEVICE.get(name)))
    _bind_tensor(torch, rw, dm)
    _bind_module(torch, rw, dm)
    _cpu_torch.bind(_bindings, torch, rw)

    bind_distributed(b, torch, {"nccl": "gloo"}, device_id=lambda d: None if rw.is_cuda(d) else d,
                     device_ids=lambda ids: None, device_type=lambda t: rw(t), is_active=installed,
                     # FSDP wants a device even on cpu: it refuses to guess one when no accelerator exists
                     fsdp_device_id=lambda d: rw.target_device if d is None or rw.is_cuda(d) else d)
    _bind_lazy_limits()


def _bind_tensor(torch: Any, rw: DeviceRewriter, dm: _cpu_device.DeviceModule) -> None:
    b, T = _bindings, torch.Tensor
    orig_to, orig_get_device = T.to, T.get_device
    device_cls = torch.device

    cache = rw.cache
    preserve = torch.preserve_format

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            a = args[0]
            c = a.__class__
            if c is str or c is int or c is device_cls:
                args = (cache.get(a) or rw(a),) + args[1:]
        if kwargs:
            d = kwargs.get("device")
            if d is not None:
                kwargs["device"] = cache.get(d) or rw(d)
        return orig_to(self, *args, **kwargs)

    def cuda(self: Any, device: Any = None, non_blocking: bool = False, memory_format: Any = preserve) -> Any:
        if device is not None:
            dm.index(device, "Tensor.cuda")
        if memory_format is preserve and self.is_cpu:
            return self  # already on the target: CUDA's .cuda() returns the tensor itself too
        return orig_to(self, "cpu", non_blocking=non_blocking, memory_format=memory_format)

    def pin_memory(self: Any, device: Any = None) -> Any:
        return self  # pageable host memory is what the CPU copies from anyway

    def get_device(self: Any) -> int:
        return dm.current if self.is_cpu else orig_get_device(self)

    def record_stream(self: Any, stream: Any) -> None:
        return None  # no allocator stream to tie the tensor to: every stream is ordered

    orig_type = T.type

    def type_(self: Any, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        if dtype is None:
            return orig_type(self)
        if isinstance(dtype, str) and dtype.startswith("torch.cuda."):
            dtype = "torch." + dtype[len("torch.cuda."):]  # the legacy CUDA type names the CPU one
        return orig_type(self, dtype, non_blocking, **kwargs)

    type_.__name__ = type_.__qualname__ = "type"  # Dynamo records a tensor method call by this name
    to.__wrapped__ = orig_to  # type: ignore[attr-defined]
    b.bind(T, "type", type_, "Tensor.type('torch.cuda.*')", "aliased")
    b.bind(T, "to", to, "Tensor.to", "aliased")
    b.bind(T, "cuda", cuda, "Tensor.cuda", "aliased")
    b.bind(T, "pin_memory", pin_memory, "Tensor.pin_memory", "emulated")
    b.bind(T, "get_device", get_device, "Tensor.get_device", "aliased")
    b.bind(T, "record_stream", record_stream, "Tensor.record_stream", "emulated")
    b.bind(T, "is_cuda", property(lambda self: self.is_cpu, doc="True on the target device (cpu)"),
           "Tensor.is_cuda", "aliased")
    for name in (n for n in _TENSOR_METHODS if n.startswith("new_")):
        if hasattr(T, name):
            b.bind(T, name, wrap_factory(getattr(T, name), rw), f"Tensor.{name}", "aliased",
                   when=cuda_device_given(rw))

    def storage_cuda(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
        return self

    for st in (torch.UntypedStorage, torch.TypedStorage):
        b.bind(st, "cuda", storage_cuda, f"{st.__name__}.cuda", "aliased")


def _bind_module(torch: Any, rw: DeviceRewriter, dm: _cpu_device.DeviceModule) -> None:
    b, M = _bindings, torch.nn.Module
    orig_to, orig_to_empty = M.to, M.to_empty
    device_cls = torch.device

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args and args[0].__class__ in (str, int, device_cls):
            args = (rw(args[0]),) + args[1:]
        if kwargs.get("device") is not None:
            kwargs["device"] = rw(kwargs["device"])
        return orig_to(self, *args, **kwargs)

    def cuda(self: Any, device: Any = None) -> Any:
        if device is not None:
            dm.index(device, "Module.cuda")
        return orig_to(self, "cpu")

    def to_empty(self: Any, *, device: Any, recurse: bool = True) -> Any:
        return orig_to_empty(self, device=rw(device), recurse=recurse)

    b.bind(M, "to", to, "Module.to", "aliased")
    b.bind(M, "cuda", cuda, "Module.cuda", "aliased")
    b.bind(M, "to_empty", to_empty, "Module.to_empty", "aliased")

    dp = torch.nn.DataParallel

    def dp_forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)  # one host: nothing to scatter

    b.bind(dp, "forward", dp_forward, "torch.nn.DataParallel", "emulated")


def _bind_lazy_limits() -> None:
    b = _bindings

    def cpp_ext(mod: Any) -> None:
        if installed():
            for name, fn in _cpu_limits.cpp_extension_bindings(mod).items():
                b.bind(mod, name, fn, f"torch.utils.cpp_extension.{name}", "unsupported")

    def symm(mod: Any) -> None:
        if installed():
            for name, fn in _cpu_limits.symmetric_memory_bindings(mod).items():
                b.bind(mod, name, fn, f"torch.distributed._symmetric_memory.{name}", "unsupported")

    def triton_jit(mod: Any) -> None:
        cls = getattr(mod, "JITFunction", None)
        if installed() and cls is not None and hasattr(cls, "run"):
            b.bind(cls, "run", _cpu_limits.triton_run(cls.run), "triton.JITFunction.run", "unsupported")

    when_imported("torch.utils.cpp_extension", cpp_ext)
    when_imported("torch.distributed._symmetric_memory", symm)
    when_imported("triton.runtime.jit", triton_jit)


def uninstall() -> None:
    """Put back every original (idempotent)."""
    global _rewrite, _device
    if _rewrite is not None or _device is not None:
        probes.uninstall()
    if _device is not None:
        from .. import emulated

        emulated.uninstall()
    _device = None
    _bindings.restore()
    _cpu_compile.forget()
    _rewrite = None
    _cpu_streams._reset()
    _cpu_memory._reset()


_state.on_reset(uninstall)
