"""Putting a replacement in place of one symbol of one module, lazily, and taking it back out.

On load of the target module each patched name becomes a property of a per-module subclass of the
module's type (data descriptors on the type win over the module __dict__), so both `X.f` and
`from X import f` go through it. The first access imports the replacement, writes the REAL object
into X.__dict__ and drops the property; once a module has no pending names its class is put back,
so nothing is left on the attribute path or the call path.
Inside X, code that calls f through its globals before anyone resolved it meets a trampoline that
resolves on its first call and then is gone.
"""

from __future__ import annotations

import _thread
import sys

from ..errors import PatchError
from ._record import MISSING, Patch
from ._standin import is_standin

# imported when the first target module loads (patches.install() in the bootstrap does not need it);
# still no functools, importlib, threading, types, dataclasses or typing at import
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any

_ModuleType = type(sys)  # types.ModuleType
# types.FunctionType, types.BuiltinFunctionType: what gets a trampoline (see _trampoline)
_FUNCTION_TYPES = (type(lambda: None), type(len))

__all__ = ["Patch", "PatchError", "MISSING", "apply", "resolve", "restore", "rebind_holders", "get_path", "set_trace"]

_lock = _thread.RLock()
_local = _thread._local()
# id(replacement handed out) -> (replacement, the original it stands for): a package that re-exports a
# patched symbol of its submodule (`from .impl import f` in __init__) picks up the replacement while
# loading; its own patch must still record the real original, not the replacement
_handed_out: dict[int, tuple[Any, Any]] = {}
_trace_on = False  # CUDASHIM_DEBUG, read once at install: off costs one bool test per patch event


def set_trace(on: bool) -> None:
    global _trace_on
    _trace_on = on


def _trace(msg: str) -> None:
    if _trace_on:
        print(f"cudashim[patches]: {msg}", file=sys.stderr)


def _resolving() -> set[int]:
    return _local.__dict__.setdefault("resolving", set())


def get_path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _lazy_class(module: ModuleType) -> type | None:
    """The module's per-module lazy subclass, creating and switching to it if needed."""
    cls = type(module)
    if cls.__dict__.get("_cudashim_lazy_base") is not None:
        return cls
    try:
        sub = type(cls.__name__, (cls,), {"_cudashim_lazy_base": cls, "__module__": cls.__module__})
        module.__class__ = sub
    except TypeError:  # a final type, or not a ModuleType we may re-class: eager replacement instead
        return None
    return sub


def _drop_property(module: ModuleType, name: str) -> None:
    cls = type(module)
    base = cls.__dict__.get("_cudashim_lazy_base")
    if base is None:
        return
    if isinstance(cls.__dict__.get(name), property):
        delattr(cls, name)
    if not any(isinstance(v, property) for v in cls.__dict__.values()):
        module.__class__ = base  # nothing pending: the module is its plain self again


def _make_property(patch: Patch) -> property:
    name = patch.symbol

    def fget(module: ModuleType) -> Any:
        return resolve(patch)

    def fset(module: ModuleType, value: Any) -> None:  # the program assigns X.f itself: it wins
        with _lock:
            patch.replacement = value
            module.__dict__[name] = value
            _drop_property(module, name)

    def fdel(module: ModuleType) -> None:
        with _lock:
            module.__dict__.pop(name, None)
            _drop_property(module, name)

    return property(fget, fset, fdel)


def _trampoline(patch: Patch, original: Any) -> Any:
    import functools

    @functools.wraps(original)
    def trampoline(*args: Any, **kwargs: Any) -> Any:
        return resolve(patch)(*args, **kwargs)

    trampoline.__cudashim_trampoline__ = True  # type: ignore[attr-defined]
    return trampoline


def apply(patch: Patch, module: ModuleType) -> None:
    """Called right after the target module loaded (or at install if it was loaded already)."""
    eager_owner: Any = None
    with _lock:
        standin = is_standin(module)
        if not standin and patch.mode == "absent-only":
            patch.state, patch.module = "native", module  # nvidia with the real package: keep it
            _trace(f"{patch.entry.target}: real module present on {patch.platform}, kept native")
            return
        name = patch.symbol
        patch.module, patch.replacement = module, MISSING
        patch.state = "stood-in" if standin else "applied"
        if "." in name:  # "Class.method": the owner is a class, patch it eagerly (below, unlocked)
            owner_path, _, attr = name.rpartition(".")
            eager_owner = get_path(module, owner_path)
            d = eager_owner.__dict__ if isinstance(eager_owner, type) else vars(eager_owner)
            patch.original = d.get(attr, MISSING)
        else:
            patch.original = MISSING if standin else _unwrap(module.__dict__.get(name, MISSING))
            if standin:  # `from X import *` on a stand-in yields exactly the patched names
                module.__dict__["__cudashim_exposed__"].add(name)
                module.__dict__["__all__"] = sorted(module.__dict__["__cudashim_exposed__"])
            cls = _lazy_class(module)
            if cls is None:  # cannot re-class this module object: resolve now (below, unlocked)
                eager_owner = module
            else:
                setattr(cls, name, _make_property(patch))
                if isinstance(patch.original, _FUNCTION_TYPES):
                    module.__dict__[name] = _trampoline(patch, patch.original)
        _trace(f"{patch.entry.target}: {patch.state}, {patch.entry.replacement} loads on first access")
    if eager_owner is not None:
        # importing the replacement while holding _lock could deadlock against another thread's import
        setattr(eager_owner, name.rpartition(".")[2], resolve(patch))


def _unwrap(value: Any) -> Any:
    """The original behind a replacement another patch handed out, else value itself."""
    hit = _handed_out.get(id(value))
    return hit[1] if hit is not None and hit[0] is value else value


def forget_handed_out() -> None:
    _handed_out.clear()


def resolve(patch: Patch) -> Any:
    """The replacement object, importing its module on first use."""
    if patch.replacement is not MISSING:
        return patch.replacement
    key = id(patch)
    busy = _resolving()
    if key in busy:  # the replacement module imports its own target: it gets the original
        return _original_or_fail(patch)
    mod_name, _, sym = patch.entry.replacement.partition(":")
    busy.add(key)
    try:
        try:
            from .._locate import import_replacement

            repl_mod = import_replacement(mod_name, patch.folder)
        except Exception as e:
            raise PatchError(
                f"cudashim: cannot import the replacement for {patch.describe()}: {type(e).__name__}: {e}; "
                f"fix the replacement path, or switch the patch off with CUDASHIM_DISABLE_PATCHES={patch.entry.target}"
            ) from e
        try:
            obj = get_path(repl_mod, sym)
        except AttributeError:
            spec = getattr(repl_mod, "__spec__", None)
            if spec is not None and getattr(spec, "_initializing", False):
                # the replacement module is still running its top and imported the target: original
                return _original_or_fail(patch)
            raise PatchError(
                f"cudashim: {mod_name!r} has no attribute {sym!r}, needed by {patch.describe()}; "
                f"fix the replacement path, or switch the patch off with CUDASHIM_DISABLE_PATCHES={patch.entry.target}"
            ) from None
    finally:
        busy.discard(key)
    with _lock:
        if patch.replacement is MISSING:
            patch.replacement = obj
            if patch.original is not MISSING:
                _handed_out.setdefault(id(obj), (obj, patch.original))
            module = patch.module
            if module is not None and "." not in patch.symbol:
                module.__dict__[patch.symbol] = obj
                _drop_property(module, patch.symbol)
            _trace(f"{patch.entry.target}: resolved to {patch.entry.replacement}")
    return patch.replacement


def _original_or_fail(patch: Patch) -> Any:
    if patch.original is MISSING:
        raise PatchError(
            f"cudashim: {patch.entry.target} has no original: {patch.module_name!r} is not installed "
            f"(stood in on {patch.platform}); the replacement {patch.entry.replacement} must not import it"
        )
    return patch.original


def rebind_holders(patch: Patch) -> None:
    """Modules that did `from X import f` before the patch hold the original: give them the replacement."""
    if patch.original is MISSING or patch.state != "applied" or "." in patch.symbol:
        return  # (a patched method is reached through its class: nobody holds a copy to re-bind)
    name, original, skip = patch.symbol, patch.original, patch.entry.replacement.split(":")[0]
    holders = [
        m for m in list(sys.modules.values())
        if isinstance(m, _ModuleType) and m is not patch.module
        and m.__name__ != skip and not m.__name__.startswith("cudashim.")
        and m.__dict__.get(name, None) is original
    ]
    if not holders:
        return
    replacement = resolve(patch)
    for m in holders:
        m.__dict__[name] = replacement
        patch.rebound.append(m.__name__)
        _trace(f"{patch.entry.target}: re-bound the copy held by {m.__name__}")


def restore(patch: Patch) -> None:
    """Put the original back exactly (or remove the symbol where there was none)."""
    with _lock:
        module = patch.module
        if module is None or patch.state not in ("applied", "stood-in"):
            patch.state, patch.module = "pending", None
            return
        name = patch.symbol
        if "." in name:
            owner_path, _, attr = name.rpartition(".")
            owner = get_path(module, owner_path)
            if patch.original is MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, patch.original)
        else:
            _drop_property(module, name)
            if patch.original is MISSING:
                module.__dict__.pop(name, None)
            else:
                module.__dict__[name] = patch.original
        for holder_name in patch.rebound:
            holder = sys.modules.get(holder_name)
            if holder is not None and holder.__dict__.get(name) is patch.replacement:
                holder.__dict__[name] = patch.original
        patch.rebound.clear()
        patch.replacement = MISSING
        patch.state, patch.module = "pending", None
