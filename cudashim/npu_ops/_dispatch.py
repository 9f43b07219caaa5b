"""Which platform the replacements serve, asked at call time (never at import)."""

from __future__ import annotations

from .. import platform as _platform

__all__ = ["platform_name"]


def platform_name() -> str:
    """'ascend' | 'nvidia' | 'cpu', from cudashim.platform (cached there, forgotten by _state.reset()).

    On every attention call (a decode step is host-bound): no import statement here. Tests that
    exercise the ascend plumbing on a CPU box replace this function.
    """
    return _platform.platform_name()
