"""Patch records and the registry of active patches: the work behind cudashim.patches.

cudashim.patches (the package) is the public face; this module does install, uninstall, plan,
status and original. The bootstrap of every shimmed interpreter only registers the watched module
names with the import hook; this module loads when one of them is first looked up, or when the
public API is used (see the package's docstring).
"""

from __future__ import annotations

import _thread
import os
import sys

from .. import _state, envs
from ..config import Config, PatchEntry
from ..errors import ConfigError, PatchError
from .. import importhook as _hook
from .packs import ALWAYS, PACKS, PLATFORM_MODE, check_config
from ._record import MISSING, Patch

# no importlib, threading or typing here: this loads in a shimmed interpreter as soon as a watched
# module is looked up; _apply/_standin (applying patches, stand-in modules) load when a target does
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

__all__ = ["MISSING", "Patch", "PatchError", "install", "uninstall", "installed", "original", "status", "plan"]


_lock = _thread.RLock()
_active: dict[str, Patch] = {}  # target "module:symbol" -> record
_by_module: dict[str, list[Patch]] = {}  # target module -> its records
_installed_with: tuple[Config, str] | None = None
_trace = False  # CUDASHIM_DEBUG as read by install(), handed to _apply


def _applier() -> Any:
    """The _apply module, imported on first need: a target module loading, or a target loaded already."""
    from . import _apply

    _apply.set_trace(_trace)
    return _apply


def _platform_name(platform: Any) -> str:
    name = platform if isinstance(platform, str) else getattr(platform, "name", None)
    if name not in PLATFORM_MODE:
        raise ConfigError(f"cudashim.patches: unknown platform {platform!r}; use one of {', '.join(PLATFORM_MODE)}")
    return name


def plan(config: Config, platform: Any) -> list[tuple[PatchEntry, str]]:
    """The patches active on `platform`: (entry, mode) for built-in packs, then config (which wins)."""
    name = _platform_name(platform)
    check_config(config)
    disabled = config.disable
    chosen: dict[str, tuple[PatchEntry, str]] = {}
    for pack, mapping in PACKS.items():
        if pack in disabled:
            continue
        for target, repl in mapping.items():
            if target not in disabled:
                chosen[target] = (PatchEntry(target, repl, None, f"built-in:{pack}"), PLATFORM_MODE[name])
    for entry in config.patches_for(name):
        if entry.target not in disabled:
            chosen[entry.target] = (entry, ALWAYS)
    return list(chosen.values())


def _config_hint(config: Config) -> str:
    return str(config.path) if config.path is not None else "pyproject.toml"


def _on_load(module: Any) -> None:
    patches = _by_module.get(module.__name__, ())
    if patches:
        apply = _applier().apply
        for p in patches:
            apply(p, module)


def install(config: Config | None, platform: Any, trace: bool | None = None) -> None:
    """Activate built-in packs and the config's patches for `platform`. Idempotent; re-install replaces.

    trace: CUDASHIM_DEBUG as it was when the install was asked for (a deferred one); None reads it now.
    """
    global _installed_with, _trace
    config = config if config is not None else Config()
    name = _platform_name(platform)
    with _lock:
        if _installed_with == (config, name):
            return
        if _installed_with is not None:
            _uninstall_patches()
        _trace = bool(envs.get("CUDASHIM_DEBUG")) if trace is None else trace
        if "cudashim.patches._apply" in sys.modules:
            _applier()  # already in use: it traces from now on as this install says
        hint = _config_hint(config)
        folder = os.path.dirname(os.fspath(config.path)) if config.path is not None else None
        for entry, mode in plan(config, name):
            p = Patch(entry=entry, mode=mode, platform=name,
                      folder=None if entry.source.startswith("built-in:") else folder)
            _active[entry.target] = p
            _by_module.setdefault(p.module_name, []).append(p)
        # watch every target module (patch on load) and every parent (stand in when absent)
        packages: set[str] = set()
        for mod in _by_module:
            parts = mod.split(".")
            packages.update(".".join(parts[:i]) for i in range(1, len(parts)))
        for mod in sorted(set(_by_module) | packages, key=lambda m: m.count(".")):
            factory = _standin_factory(mod in packages, name, hint)
            _hook.watch(mod, _on_load if mod in _by_module else None, factory)
        _installed_with = (config, name)
        already = [(m, sys.modules[m]) for m in _by_module if m in sys.modules]
    # targets loaded before install: patch now, then re-bind `from X import f` holders
    for mod, module in already:
        _on_load(module)
        for p in _by_module[mod]:
            _applier().rebind_holders(p)


def _standin_factory(is_package: bool, platform: str, hint: str) -> Any:
    def factory(fullname: str) -> Any:
        from ._standin import make_spec

        return make_spec(fullname, is_package, platform, hint)

    return factory


def _uninstall_patches() -> None:
    global _installed_with
    apply_mod = sys.modules.get("cudashim.patches._apply")
    standin_mod = sys.modules.get("cudashim.patches._standin")
    if apply_mod is not None:  # else no patch was ever applied: every record is still pending
        for p in list(_active.values()):
            apply_mod.restore(p)
    # stand-ins leave sys.modules (deepest first) and their parents' attributes
    standins = [n for n, m in list(sys.modules.items()) if standin_mod.is_standin(m)] if standin_mod is not None else []
    for name in sorted(standins, key=lambda n: -n.count(".")):
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent and parent in sys.modules and getattr(sys.modules[parent], child, None) is not None:
            try:
                delattr(sys.modules[parent], child)
            except AttributeError:
                pass
    _active.clear()
    _by_module.clear()
    if apply_mod is not None:
        apply_mod.forget_handed_out()
    _hook.unwatch_all()
    _installed_with = None


def uninstall() -> None:
    """Undo install() and drop pending when_imported callbacks. Idempotent."""
    with _lock:
        _uninstall_patches()
        _hook.clear()


def installed() -> bool:
    return _installed_with is not None


def original(target: str) -> Any:
    """What "module:symbol" was before the shim patched it (imports the module if needed)."""
    mod_name, sep, sym = target.partition(":")
    if not sep or not mod_name or not sym:
        raise ValueError(f"cudashim.original({target!r}): write the target as \"module:symbol\"")
    from importlib import import_module

    p = _active.get(target)
    if p is None:  # not patched here: the object itself is the original
        return _applier().get_path(import_module(mod_name), sym)
    if p.module is None:
        import_module(mod_name)  # loading it applies the patch and records the original
    if p.state == "native":
        return _applier().get_path(p.module, sym)
    if p.original is MISSING:
        raise PatchError(
            f"cudashim.original({target!r}): there is no original on {p.platform}: {mod_name!r} is not "
            f"installed and is stood in; install the real package to call it"
        )
    return p.original


def status() -> list[dict[str, Any]]:
    """One dict per active patch: target, replacement, source, platform, state, resolved, rebound."""
    with _lock:
        return [
            {
                "target": p.entry.target,
                "replacement": p.entry.replacement,
                "source": p.entry.source,
                "platform": p.platform,
                "state": p.state,
                "resolved": p.replacement is not MISSING,
                "rebound": list(p.rebound),
            }
            for p in _active.values()
        ]


_state.on_reset(uninstall)

# A program that uses the registry before any armed module loaded (cudashim.patches.status() first
# thing) gets the bootstrap's armed install carried out now, so what it sees is what was asked for.
_hook.load_armed()
