"""Which platform the replacements serve, asked at call time (never at import)."""

from __future__ import annotations

__all__ = ["platform_name"]


def platform_name() -> str:
    """'ascend' | 'nvidia' | 'cpu', from cudashim.platform (cached there, forgotten by _state.reset()).

    Tests that exercise the ascend plumbing on a CPU box replace this function.
    """
    from .. import platform

    return str(platform.platform_name())
