"""All mutable process state of the shim lives here, so tests can put it back with reset().

Modules that keep state register a reset callback with on_reset(); reset() runs them newest first.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays out of start-up: every shimmed interpreter imports this module
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable

__all__ = ["on_reset", "reset"]

_resetters: list[Callable[[], None]] = []


def on_reset(fn: Callable[[], None]) -> Callable[[], None]:
    """Register fn to run on reset(); usable as a decorator. Registering twice is a no-op."""
    if fn not in _resetters:
        _resetters.append(fn)
    return fn


def reset() -> None:
    """Undo every piece of process state the shim holds (tests only; newest registration first)."""
    for fn in reversed(_resetters):
        fn()
