"""Counting a program's calls of an API for the migration report: which frame is the user's, and the
wrappers that count (a function's, or a class's through a counting metaclass).

Nothing here holds report state: the caller passes the entry to count into, a list
[treatment, calls, first call site] mutated in place so the hot path is one increment.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar

from .._frames import LIBRARY_DIRS, SHIM_DIR, framework_dirs

__all__ = ["call_site", "count_calls", "count_constructions", "see_framework"]

F = TypeVar("F", bound=Callable[..., Any])

_getframe = sys._getframe


_skip_dirs = framework_dirs  # looked up per first call (rare)


_framework: tuple[str, ...] = ("<frozen",)  # torch's folders once wrap() has seen torch imported


def _from_program() -> bool:
    # who made this call: the first frame above the wrapper that is not torch's. The shim's own use
    # of an aliased API (directly, or through torch) is not the program's and is not counted.
    f = _getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(SHIM_DIR):
            return False
        if not name.startswith(_framework):
            return True
        f = f.f_back
    return True




def call_site() -> str | None:
    """The first frame in the user's code: not the shim's or torch's, not an installed library's
    (a library's frame only when no user frame is above it, e.g. a console script)."""
    skip = _skip_dirs()
    frame = sys._getframe(2)
    library = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(skip) and not filename.startswith("<frozen"):
            if not any(d in filename for d in LIBRARY_DIRS):
                return f"{filename}:{frame.f_lineno}"
            library = library or f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return library


def _hit(e: list[Any]) -> None:
    # the call site is looked up once, on the first call; afterwards a hit is one increment
    if e[2] is None:
        e[2] = call_site() or "?"
    e[1] += 1


def see_framework() -> None:
    """Take torch's folders as the framework's from now on (torch is imported by the time APIs are bound)."""
    global _framework
    _framework = ("<frozen",) + _skip_dirs()[1:]


def count_calls(fn: F, e: list[Any], when: Callable[[tuple[Any, ...], dict[str, Any]], bool] | None = None) -> F:
    """`fn` wrapped so that the program's calls (those `when` accepts) count into `e`."""
    if when is None:
        @functools.wraps(fn)
        def counted_call(*args: Any, **kwargs: Any) -> Any:
            if _from_program():
                _hit(e)
            return fn(*args, **kwargs)
    else:
        @functools.wraps(fn)
        def counted_call(*args: Any, **kwargs: Any) -> Any:
            if when(args, kwargs) and _from_program():
                _hit(e)
            return fn(*args, **kwargs)
    return counted_call  # type: ignore[return-value]


def count_constructions(cls: type, e: list[Any]) -> type | None:
    """A subclass of `cls` counting the program's constructions into `e`; None where none can be made."""
    meta = type(cls)

    def __call__(self: type, *args: Any, **kwargs: Any) -> Any:
        if self is counted:
            if _from_program():
                _hit(e)
            return cls(*args, **kwargs)
        return meta.__call__(self, *args, **kwargs)  # a user's subclass of the alias

    def __instancecheck__(self: type, inst: Any) -> bool:
        return isinstance(inst, cls) if self is counted else meta.__instancecheck__(self, inst)

    def __subclasscheck__(self: type, sub: type) -> bool:
        return issubclass(sub, cls) if self is counted else meta.__subclasscheck__(self, sub)

    try:
        counted_meta = type(meta)(
            "_Counted" + meta.__name__,
            (meta,),
            {"__call__": __call__, "__instancecheck__": __instancecheck__, "__subclasscheck__": __subclasscheck__},
        )
        counted = counted_meta(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
    except (TypeError, AttributeError):  # final classes, exotic metaclasses (enums): left as they are, listed without counts
        return None
    counted.__cudashim_report__ = e  # type: ignore[attr-defined]
    return counted
