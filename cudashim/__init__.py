"""cudashim: run PyTorch programs written for CUDA, unchanged, on Ascend NPUs and plain CPUs.

`import cudashim` imports no torch, no pynvml and no extension: everything heavy resolves lazily
through the module __getattr__ below (a subprocess test proves it).
"""

# No typing, no importlib, no `from __future__ import annotations` (an import of its own) and not even
# cudashim.errors at import: every shimmed interpreter imports this package before user code, where
# every module imported is start-up time. Annotations naming typing's names are strings; the errors resolve lazily.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from .errors import (
        CapabilityError,
        ConfigError,
        CudashimError,
        EnvError,
        KernelUnavailableError,
        VisibilityError,
    )

__version__ = "0.1.0"

__all__ = [
    "PLATFORM",
    "get_platform",
    "activate",
    "deactivate",
    "original",
    "require",
    "status",
    "CudashimError",
    "CapabilityError",
    "ConfigError",
    "EnvError",
    "KernelUnavailableError",
    "VisibilityError",
]

# name -> (module, attribute, call it?)
_LAZY: dict[str, tuple[str, str, bool]] = {
    "PLATFORM": ("cudashim.platform.contract", "get_platform", True),
    "get_platform": ("cudashim.platform.contract", "get_platform", False),
    "activate": ("cudashim._bootstrap", "activate", False),
    "deactivate": ("cudashim._bootstrap", "deactivate", False),
    "status": ("cudashim._bootstrap", "status", False),
    "original": ("cudashim.patches._patch", "original", False),
    "require": ("cudashim.platform.capabilities", "require", False),
}
# the error classes: the same objects as cudashim.errors' (`cudashim.ConfigError is
# cudashim.errors.ConfigError`), imported on first use, not in every shimmed start-up
_LAZY.update((name, ("cudashim.errors", name, False)) for name in (
    "CudashimError", "CapabilityError", "ConfigError", "EnvError", "KernelUnavailableError", "VisibilityError"))


def __getattr__(name: str) -> "Any":
    try:
        module, attr, call = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'cudashim' has no attribute {name!r}") from None
    from importlib import import_module

    value = getattr(import_module(module), attr)
    # PLATFORM is not cached here: get_platform() caches, and tests reset it through cudashim._state.reset()
    return value() if call else value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
