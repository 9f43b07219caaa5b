"""The reset registry: every module that keeps process state registers how to put it back.

Modules that keep state register a callback with on_reset(); reset() runs them newest first (tests
use it through cudashim.status()'s neighbour `cudashim._state.reset`). The bootstrap and hardware
detection register here in every shimmed interpreter, so this module imports nothing.
"""

# no typing or `from __future__ import annotations` here: this module is on the start-up path
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable

__all__ = ["on_reset", "reset"]

_resetters: "list[Callable[[], None]]" = []


def on_reset(fn: "Callable[[], None]") -> "Callable[[], None]":
    """Register fn to run on reset(); usable as a decorator. Registering twice is a no-op."""
    if fn not in _resetters:
        _resetters.append(fn)
    return fn


def reset() -> None:
    """Undo every piece of process state the shim holds (tests only; newest registration first)."""
    for fn in reversed(_resetters):
        fn()
