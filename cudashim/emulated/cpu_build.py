"""What torch's CPU build compiles out for CUDA, supplied for the emulated device.

A CPU wheel has the CUDA device type and dispatch key, but some Python entry points are C++ behind
`#ifdef USE_CUDA` and fail whatever device is registered:

* `torch.UntypedStorage(n, device="cuda")`: "Storage device not recognized" -- torch.load's
  restore path, `storage.cuda()` and `storage.to("cuda")` all build device storages this way;
* the legacy constructors `torch.cuda.FloatTensor(...)` & co.: "Torch not compiled with CUDA";
* `torch._C._scatter / _gather / _broadcast*` (torch/csrc/cuda/comm.cpp), which nn.DataParallel
  and torch.nn.parallel.comm call.

One CUDA entry point has no behaviour the device can give on either build: torch.cuda.jiterator's
`torch._C._cuda_jiterator_compile_and_launch_kernel` compiles the program's CUDA C++ with NVRTC and
launches it on a GPU (a CPU build lacks it; a CUDA build's asks the driver that is not there). It raises
the CapabilityError naming the jiterator and the way out.

Each is given CUDA's observable behaviour with the device's own tensors: storages from the device's
allocator, chunks copied to each device, outputs on the device asked for (CPU for -1).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .. import _torch_compat

__all__ = ["bind", "alias_class"]

_JITERATOR = "_cuda_jiterator_compile_and_launch_kernel"

_LEGACY = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
           "ShortTensor", "IntTensor", "LongTensor", "BoolTensor")


def alias_class(cls: type, make: Callable[..., Any]) -> type:
    """A stand-in for cls whose construction goes through make() and that answers isinstance /
    issubclass for cls; instances are real cls instances, so C++ type checks are unaffected."""
    meta = type(cls)

    def __call__(self: type, *args: Any, **kwargs: Any) -> Any:
        return make(*args, **kwargs) if self is alias else meta.__call__(self, *args, **kwargs)

    def __instancecheck__(self: type, inst: Any) -> bool:
        return isinstance(inst, cls)

    def __subclasscheck__(self: type, sub: type) -> bool:
        return issubclass(sub, cls)

    alias_meta = meta("_Alias" + meta.__name__, (meta,), {"__call__": __call__, "__instancecheck__": __instancecheck__,
                                                          "__subclasscheck__": __subclasscheck__})
    alias = alias_meta(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return alias


def _storage_new(torch: Any, index: Callable[[Any], int]) -> Any:
    base_new = torch._C.StorageBase.__new__

    def __new__(cls: type, *args: Any, device: Any = None, **kwargs: Any) -> Any:
        if device is not None and cls is torch.UntypedStorage:
            dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
            if dev.type == "cuda":
                n = args[0] if args else 0
                if not isinstance(n, int):  # a sequence of bytes: CUDA copies it to the device
                    data = base_new(cls, *args, **kwargs)
                    out = torch.empty(data.nbytes(), dtype=torch.uint8, device=torch.device("cuda", index(dev)))
                    storage = out.untyped_storage()
                    storage.copy_(data)
                    return storage
                return torch.empty(n, dtype=torch.uint8, device=torch.device("cuda", index(dev))).untyped_storage()
        if device is not None:
            kwargs["device"] = device
        return base_new(cls, *args, **kwargs)

    return staticmethod(__new__)


def _legacy_types(torch: Any, index: Callable[[Any], int]) -> dict[str, Any]:
    """torch.cuda.FloatTensor & co.: isinstance() as torch's own types answer it (the device's tensors
    carry the CUDA key), construction through the CPU constructor, then to the current device."""
    out: dict[str, Any] = {}
    for name in _LEGACY:
        orig, cpu_type = getattr(torch.cuda, name, None), getattr(torch, name, None)
        if orig is None or cpu_type is None:
            continue

        class _Meta(type):
            def __instancecheck__(cls, inst: Any, _orig: Any = orig) -> bool:
                return isinstance(inst, _orig)

            def __subclasscheck__(cls, sub: type, _orig: Any = orig) -> bool:
                return sub is cls or issubclass(sub, _orig)

        def __new__(cls: type, *args: Any, _cpu: Any = cpu_type, device: Any = None, **kwargs: Any) -> Any:
            dev = torch.device("cuda", index(device))
            if len(args) == 1 and isinstance(args[0], torch.Tensor):
                return args[0].to(dev, _cpu.dtype)
            return _cpu(*args, **kwargs).to(dev)

        # Tensor.type(cls) reads the class's C-level name: "torch.cuda.FloatTensor", as the real type's
        stand_in = _Meta(f"torch.cuda.{name}", (), {"__new__": __new__, "__module__": "torch.cuda", "__qualname__": name,
                                                  "dtype": getattr(cpu_type, "dtype", None), "is_cuda": True})
        out[name] = stand_in
    return out


def _comm(torch: Any) -> dict[str, Any]:
    """torch/csrc/cuda/comm.cpp's primitives over the device's copies (same outputs, same aliasing:
    what is already on the target device is returned, not copied)."""

    def dev(i: Any) -> Any:
        return torch.device("cuda", i) if isinstance(i, int) else torch.device(i)

    def _broadcast(tensor: Any, devices: Sequence[Any]) -> list[Any]:
        return [tensor if tensor.device == dev(d) else tensor.to(dev(d)) for d in devices]

    def _broadcast_out(tensor: Any, out: Sequence[Any]) -> list[Any]:
        for o in out:
            o.copy_(tensor)
        return list(out)

    def _broadcast_coalesced(tensors: Sequence[Any], devices: Sequence[Any], buffer_size: int) -> list[list[Any]]:
        return [list(tensors)] + [[t.to(dev(d)) for t in tensors] for d in devices[1:]]

    def _scatter(tensor: Any, devices: Sequence[Any], chunk_sizes: Any, dim: int, streams: Any) -> list[Any]:
        chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None else tensor.chunk(len(devices), dim)
        return [c.to(dev(d), non_blocking=True) for c, d in zip(chunks, devices)]

    def _scatter_out(tensor: Any, out: Sequence[Any], dim: int, streams: Any) -> list[Any]:
        for o, c in zip(out, tensor.split([o.shape[dim] for o in out], dim)):
            o.copy_(c)
        return list(out)

    def _gather(tensors: Sequence[Any], dim: int, destination: int | None) -> Any:
        where = torch.device("cpu") if destination == -1 else \
            torch.device("cuda", torch.cuda.current_device() if destination is None else destination)
        return torch.cat([t.to(where) for t in tensors], dim)

    def _gather_out(tensors: Sequence[Any], out: Any, dim: int) -> Any:
        return torch.cat([t.to(out.device) for t in tensors], dim, out=out)

    return {f.__name__: f for f in (_broadcast, _broadcast_out, _broadcast_coalesced, _scatter, _scatter_out,
                                      _gather, _gather_out)}


def _jiterator_refusal(*args: Any, **kwargs: Any) -> Any:
    from ..errors import CapabilityError

    raise CapabilityError("torch.cuda.jiterator is not available on the emulated cuda device: it compiles CUDA C++ "
                          "with NVRTC and launches it on a GPU; write the elementwise function with torch operators "
                          "(torch.compile fuses them) or as a Triton kernel")


def bind(bindings: Any, torch: Any, index: Callable[[Any], int]) -> None:
    """Bind the CPU build's missing CUDA entry points (restorable bindings); index checks a device."""
    bindings.bind(torch.UntypedStorage, "__new__", _storage_new(torch, index))
    for name, value in _legacy_types(torch, index).items():
        bindings.bind(torch.cuda, name, value, f"torch.cuda.{name}", "emulated")
    for name, fn in _comm(torch).items():
        if _torch_compat.binds_over_cuda_entry(torch, name):
            bindings.bind(torch._C, name, fn, f"torch.nn.parallel.comm ({name})", "emulated")
    if _torch_compat.binds_over_cuda_entry(torch, _JITERATOR):
        bindings.bind(torch._C, _JITERATOR, _jiterator_refusal, "torch.cuda.jiterator", "emulated")
    if _torch_compat.cuda_build(torch):
        # a CUDA build has cuDNN loaded; the device has none, and its CUDA kernels are the CPU's: nn.LSTM's
        # flatten_parameters and the other cuDNN paths that ask torch.backends.cudnn stay off, as on a CPU build
        bindings.bind(torch.backends.cudnn, "is_available", lambda: False, "torch.backends.cudnn.is_available",
                      "emulated")
