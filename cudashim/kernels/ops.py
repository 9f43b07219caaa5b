"""The platform's kernels: every public `*_tl` factory of `cudashim.kernels.<backend>`.

The backend is `get_platform().tilelang_ops_backend` ("cuda", "ascend" or "torch"). New kernels need
no edit here: a module in the backend package defining `name_tl` is picked up by the walk below.
Asking for a factory the backend lacks raises KernelUnavailableError naming the kernel, the
backend and the backends that do have it. Nothing is imported until the first attribute access,
so `import cudashim.kernels.ops` stays cheap and platform resolution happens when it is needed.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Callable

from .. import _state
from ..errors import KernelUnavailableError
from . import BACKENDS

__all__ = ["backend", "factories", "backend_factories"]

_exported: dict[str, Callable[..., Any]] | None = None
_backend: str | None = None


def backend_factories(name: str) -> dict[str, Callable[..., Any]]:
    """Every public `*_tl` factory defined in backend package `name`, by factory name."""
    pkg = importlib.import_module(f"{__package__}.{name}")
    found: dict[str, Callable[..., Any]] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for attr, obj in vars(mod).items():
            if attr.startswith("_") or not attr.endswith("_tl") or isinstance(obj, ModuleType) or not callable(obj):
                continue
            found[attr] = obj
    return found


def backend() -> str:
    """The active backend name, from the platform (resolved once, until cudashim._state.reset())."""
    global _backend
    if _backend is None:
        from ..platform.contract import get_platform

        _backend = str(get_platform().tilelang_ops_backend)
    return _backend


def factories() -> dict[str, Callable[..., Any]]:
    """The active backend's factories (loaded once)."""
    global _exported
    if _exported is None:
        _exported = backend_factories(backend())
    return _exported


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        # private and dunder probes (copy, pickle, inspect) must not resolve the platform
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    table = factories()
    try:
        return table[name]
    except KeyError:
        pass
    active = backend()
    others = [b for b in BACKENDS if b != active and name in _names_in(b)]
    has = ", ".join(others) if others else "none of " + ", ".join(BACKENDS)
    raise KernelUnavailableError(
        f"kernel {name!r} is not in the {active!r} kernel backend (cudashim.kernels.{active}); "
        f"backends that have it: {has}. Implement {name} in cudashim/kernels/{active}/ "
        f"or run on a platform whose backend has it"
    )


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(factories()))


def _names_in(name: str) -> set[str]:
    try:
        return set(backend_factories(name))
    except ImportError:
        return set()


@_state.on_reset
def _reset() -> None:
    global _exported, _backend
    _exported = None
    _backend = None
