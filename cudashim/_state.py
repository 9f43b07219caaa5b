"""The reset registry: every module that keeps process state registers how to put it back.

Modules that keep state register a callback with on_reset(); reset() runs them newest first (tests
use it through cudashim.status()'s neighbour `cudashim._state.reset`).

The two stateful modules of every shimmed start-up, the bootstrap and hardware detection, do not
import this module to register (one import more before user code, in every process): they
are named in _START_UP instead, and reset() calls their `_reset` when they are loaded, after the
registered callbacks (they load first, so "newest first" puts them last).
"""

import sys

# no typing or `from __future__ import annotations` here: this module is on the start-up path
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable

__all__ = ["on_reset", "reset"]

_resetters: "list[Callable[[], None]]" = []
# start-up modules with process state, newest first: each defines `_reset()` (tests/unit/test_state.py)
_START_UP = ("cudashim._bootstrap", "cudashim.hardware")


def on_reset(fn: "Callable[[], None]") -> "Callable[[], None]":
    """Register fn to run on reset(); usable as a decorator. Registering twice is a no-op."""
    if fn not in _resetters:
        _resetters.append(fn)
    return fn


def reset() -> None:
    """Undo every piece of process state the shim holds (tests only; newest registration first)."""
    for fn in reversed(_resetters):
        fn()
    for name in _START_UP:
        module = sys.modules.get(name)
        if module is not None:
            module._reset()
