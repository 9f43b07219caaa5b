"""The runtime record of one active patch, shared by the registry (_patch) and applying (_apply)."""

from __future__ import annotations

# no typing: this loads with the registry, the first time torch or a patch target is looked up
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any

    from ..config import PatchEntry

__all__ = ["MISSING", "Patch"]


# The runtime record of one active patch, and the two names every part of patching shares.
class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


class Patch:
    """Runtime record of one active patch (one target); compared by identity."""

    __slots__ = ("entry", "mode", "platform", "original", "replacement", "state", "module", "rebound", "folder")

    def __init__(self, entry: PatchEntry, mode: str, platform: str, original: Any = MISSING,
                 replacement: Any = MISSING, state: str = "pending", module: ModuleType | None = None,
                 rebound: list[str] | None = None, folder: str | None = None) -> None:
        self.entry = entry
        self.mode = mode  # ALWAYS | ABSENT_ONLY (the package's pack table)
        self.platform = platform
        self.original = original
        self.replacement = replacement
        self.state = state  # pending | applied | stood-in | native
        self.module = module
        self.rebound: list[str] = [] if rebound is None else rebound
        self.folder = folder  # the config's folder, where the replacement resolves first (None: built-in)

    def __repr__(self) -> str:
        return f"Patch({self.entry.target!r}, mode={self.mode!r}, platform={self.platform!r}, state={self.state!r})"

    @property
    def module_name(self) -> str:
        return self.entry.target.split(":")[0]

    @property
    def symbol(self) -> str:
        return self.entry.target.split(":")[1]

    def describe(self) -> str:
        return f"{self.entry.target} -> {self.entry.replacement} (from {self.entry.source}, platform {self.platform})"
