"""Per-symbol patch maps: swap CUDA-only symbols when their modules load (docs/design.md §5).

    PACKS, PLATFORM_MODE         the built-in patch packs and when they apply on each platform
    target_modules(config, p)    the modules holding a patch target active on platform p
    check_config(config)         sub-tables name platforms, `disable` names packs or targets (ConfigError)
    install(config, platform)    built-in packs + config patches for `platform`, through cudashim.importhook
    uninstall()                  every original back, stand-ins gone, watches dropped
    original("X:f")              the object X.f was before the shim patched it
    status()                     one dict per active patch: target, replacement, source, state, rebound
    plan(config, platform)       the (entry, mode) pairs install() would activate

This package face is names only: the packs are data in packs.py, which the bootstrap reads in every
shimmed start-up. The registry (_patch), applying (_apply) and stand-ins (_standin) load on first
use: in a shimmed process, when the import hook first sees torch or a patch target looked up.
"""

# no importlib, typing or `from __future__ import annotations` here (each one more import): this
# package loads in every shimmed interpreter's start-up; annotations naming typing's names are strings
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from ..errors import PatchError, StandInAttributeError
    from ._patch import MISSING, Patch, install, installed, original, plan, status, uninstall

__all__ = [
    "install",
    "uninstall",
    "installed",
    "original",
    "status",
    "plan",
    "PatchError",
    "StandInAttributeError",
    "PACKS",
    "PLATFORM_MODE",
    "ALWAYS",
    "ABSENT_ONLY",
    "pack_of",
    "target_modules",
    "check_config",
]

from .packs import ABSENT_ONLY, ALWAYS, PACKS, PLATFORM_MODE, check_config, pack_of, target_modules

_REGISTRY = ("install", "uninstall", "installed", "original", "status", "plan", "Patch", "MISSING")


def __getattr__(name: str) -> "Any":
    # the registry loads on first use: a shimmed start-up that imports no patch target never needs it
    if name in _REGISTRY:
        from . import _patch

        return getattr(_patch, name)
    if name in ("PatchError", "StandInAttributeError"):
        from .. import errors

        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
