"""What the emulated device does not do, failing loudly at construction or first call.

Each stand-in goes through cudashim.platform.capabilities.require(capability, platform, api) so the message
and the way out come from the one capability table; should the table not raise (or not be there
yet), the stand-in raises its own CapabilityError: the cpu platform never silently pretends to
build a CUDA extension. (Triton kernels run: cudashim.triton_route.)
"""

from __future__ import annotations

from typing import Any, Callable, NoReturn

from ..errors import CapabilityError
from ._common import when_imported

__all__ = [
    "unsupported",
    "cpp_extension_bindings",
    "symmetric_memory_bindings",
    "bind_lazy",
]

_PLATFORM = "cpu"


def unsupported(capability: str, api: str, way_out: str) -> NoReturn:
    try:
        from ..platform.capabilities import require
    except ImportError:
        require = None  # type: ignore[assignment]
    if require is not None:
        try:
            require(capability, platform=_PLATFORM, api=api)
        except CapabilityError:
            raise
        except (TypeError, KeyError, ValueError):  # a table that disagrees on the call: our own message
            pass
    raise CapabilityError(f"{api} is not available on {_PLATFORM} (capability {capability!r}); {way_out}")


_CUDA_SUFFIXES = (".cu", ".cuh")
_EXT_WAY = ("build the extension's CPU version (CppExtension / load() without .cu sources), "
            "or map its Python entry points to portable code in [tool.cudashim.patches]")


def _has_cuda_sources(sources: Any) -> bool:
    if isinstance(sources, str):
        sources = [sources]
    return any(str(s).endswith(_CUDA_SUFFIXES) for s in (sources or ()))


def cpp_extension_bindings(mod: Any) -> dict[str, Callable[..., Any]]:
    """Replacements for torch.utils.cpp_extension entry points that would compile CUDA code."""
    load, load_inline, cuda_ext = mod.load, mod.load_inline, mod.CUDAExtension

    def load_(name: str, sources: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("with_cuda") or _has_cuda_sources(sources):
            unsupported("cuda_cpp_extensions", f"torch.utils.cpp_extension.load({name!r}) with CUDA sources", _EXT_WAY)
        return load(name, sources, *args, **kwargs)

    def load_inline_(name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kwargs: Any) -> Any:
        if cuda_sources or kwargs.get("with_cuda"):
            unsupported("cuda_cpp_extensions", f"torch.utils.cpp_extension.load_inline({name!r}) with cuda_sources",
                        _EXT_WAY)
        return load_inline(name, cpp_sources, cuda_sources, *args, **kwargs)

    def cuda_extension(name: str, *args: Any, **kwargs: Any) -> Any:
        unsupported("cuda_cpp_extensions", f"torch.utils.cpp_extension.CUDAExtension({name!r})", _EXT_WAY)

    load_.__wrapped__ = load  # type: ignore[attr-defined]
    load_inline_.__wrapped__ = load_inline  # type: ignore[attr-defined]
    cuda_extension.__wrapped__ = cuda_ext  # type: ignore[attr-defined]
    return {"load": load_, "load_inline": load_inline_, "CUDAExtension": cuda_extension}


_SYMM_WAY = "use torch.distributed collectives on ordinary tensors instead of symmetric memory"


def symmetric_memory_bindings(mod: Any) -> dict[str, Callable[..., Any]]:
    """Replacements for torch.distributed._symmetric_memory allocation / rendezvous."""
    out: dict[str, Callable[..., Any]] = {}
    for name in ("empty", "rendezvous", "enable_symm_mem_for_group", "get_symm_mem_workspace"):
        if hasattr(mod, name):
            api = f"torch.distributed._symmetric_memory.{name}"

            def refuse(*args: Any, _api: str = api, **kwargs: Any) -> NoReturn:
                unsupported("symmetric_memory", _api, _SYMM_WAY)

            refuse.__name__ = name
            out[name] = refuse
    return out


def bind_lazy(b: Any, is_active: Callable[[], bool]) -> None:
    """Bind the refusals into b when their modules load (through the one import hook)."""

    def cpp_ext(mod: Any) -> None:
        if is_active():
            for name, fn in cpp_extension_bindings(mod).items():
                b.bind(mod, name, fn, f"torch.utils.cpp_extension.{name}", "unsupported")

    def symm(mod: Any) -> None:
        if is_active():
            for name, fn in symmetric_memory_bindings(mod).items():
                b.bind(mod, name, fn, f"torch.distributed._symmetric_memory.{name}", "unsupported")

    when_imported("torch.utils.cpp_extension", cpp_ext)
    when_imported("torch.distributed._symmetric_memory", symm)
