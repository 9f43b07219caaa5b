"""Per-symbol patch maps: swap CUDA-only symbols when their modules load (DESIGN.md §5).

    install(config, platform)   built-in packs + config patches for `platform`, through the one finder
    uninstall()                  every original back, stand-ins gone, finder off sys.meta_path
    when_imported(name, cb)      cb(module) right after `name` loads, or at once if it is loaded
    original("X:f")              the object X.f was before the shim patched it
    status()                     one dict per active patch: target, replacement, source, state, rebound
    PACKS, PLATFORM_MODE         the built-in patch packs (data of cudashim.config) and when they apply; pack_of

A shimmed process loads this package only when a module the hook would watch (torch, or one holding
a patch target) is first looked up, or when a program imports it: until then the bootstrap's armed
hook (cudashim._bootstrap._Pending) holds the names, and the last lines here carry out its install.
install() itself defers too, when no target is loaded yet: it only hands the import hook the module
names to watch, and the records and the registry (_patch) load when one of those modules is first
looked up, or when any function here other than when_imported() is called. What a caller sees is
the same as an install done at once.
"""

import _thread
import sys

from .. import _on_reset, envs
from ..config import PACKS, Config, target_modules
from . import _hook

# no importlib, threading, typing or `from __future__ import annotations` here (each one more
# import): this package loads in every shimmed interpreter's start-up; hints naming typing's or
# lazily loaded names are strings
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any

    from ._patch import MISSING, Patch, PatchError
    from ._standin import StandInAttributeError

__all__ = [
    "install",
    "uninstall",
    "installed",
    "when_imported",
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
]

# ---------------------------------------------------------------------------------------------------
# The built-in patch packs (PACKS) are data of cudashim.config, next to the patch maps a project
# writes there: the bootstrap needs their module names in every shimmed start-up, and this package
# loads only when one of those modules (or torch) is first imported. When a built-in patch applies:

ALWAYS = "always"
ABSENT_ONLY = "absent-only"

# platform -> when a built-in patch applies
PLATFORM_MODE: dict[str, str] = {"ascend": ALWAYS, "cpu": ALWAYS, "nvidia": ABSENT_ONLY}


def pack_of(target: str) -> str | None:
    """The built-in pack holding `target`, or None."""
    for name, mapping in PACKS.items():
        if target in mapping:
            return name
    return None


# ---------------------------------------------------------------------------------------------------
# The patch API. The registry (_patch) does the work; it loads when first needed (see the docstring).

when_imported = _hook.when_imported

_lock = _thread.RLock()
# an install handed to the hook but not carried out yet: (config, platform, CUDASHIM_DEBUG then)
_deferred: tuple[Config, str, bool] | None = None
_IMPL = "cudashim.patches._patch"


def __getattr__(name: str) -> "Any":
    if name in ("PatchError", "Patch", "MISSING"):  # defined with the records, loaded on first use
        from . import _patch

        return getattr(_patch, name)
    if name == "StandInAttributeError":  # public, but only stand-ins (imported with _standin) raise it
        from ._standin import StandInAttributeError

        return StandInAttributeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _platform_name(platform: "Any") -> str:
    name = platform if isinstance(platform, str) else getattr(platform, "name", None)
    if name not in PLATFORM_MODE:
        from ..errors import ConfigError

        raise ConfigError(f"cudashim.patches: unknown platform {platform!r}; use one of {', '.join(PLATFORM_MODE)}")
    return name


def _realize() -> None:
    """Carry out the deferred install, if any: the registry watches for real, then placeholders go."""
    global _deferred
    with _lock:
        pending = _deferred
        if pending is None:
            return
        from . import _patch

        _patch.install(*pending)
        _deferred = None
        _hook.undefer()


def _impl() -> "ModuleType":
    """The registry, with a deferred install carried out first."""
    _realize()
    from . import _patch

    return _patch


def install(config: Config | None, platform: "Any") -> None:
    """Activate built-in packs and the config's patches for `platform`. Idempotent; re-install replaces."""
    global _deferred
    config = config if config is not None else Config()
    name = _platform_name(platform)
    with _lock:
        if _deferred is not None:
            if _deferred[:2] == (config, name):
                return
            _deferred = None
            _hook.unwatch_all()  # only placeholders are watched: nothing was applied yet
        if _IMPL not in sys.modules:
            targets = target_modules(config, name)
            if not any(m in sys.modules for m in targets):  # else patch those now: the registry does
                _deferred = (config, name, bool(envs.get("CUDASHIM_DEBUG")))
                _hook.defer(target_modules(config, name, packages=True), _realize)
                return
        from . import _patch

        _patch.install(config, name)


def uninstall() -> None:
    """Undo install() and drop pending when_imported callbacks. Idempotent."""
    global _deferred
    with _lock:
        _deferred = None
        impl = sys.modules.get(_IMPL)
        if impl is not None:
            impl.uninstall()
        else:
            _hook.clear()


def installed() -> bool:
    impl = sys.modules.get(_IMPL)
    return _deferred is not None or (impl is not None and impl.installed())


def plan(config: Config, platform: "Any") -> "list[tuple[Any, str]]":
    """The patches active on `platform`: (entry, mode) for built-in packs, then config (which wins)."""
    from . import _patch

    return _patch.plan(config, platform)


def original(target: str) -> "Any":
    """What "module:symbol" was before the shim patched it (imports the module if needed)."""
    return _impl().original(target)


def status() -> "list[dict[str, Any]]":
    """One dict per active patch: target, replacement, source, platform, state, resolved, rebound."""
    return _impl().status()


_on_reset(uninstall)  # the registry of cudashim._state, without importing it

# A shimmed start-up arms the hook without loading this package (cudashim._bootstrap._Pending): a
# program that imports it before any watched module gets that install carried out now, so what it
# sees here (installed(), status(), original()) is what the bootstrap asked for.
_bootstrap = sys.modules.get("cudashim._bootstrap")
if _bootstrap is not None:
    _bootstrap._load_hook()
