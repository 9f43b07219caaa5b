"""[tool.cudashim] in the nearest pyproject.toml, or cudashim.toml, or CUDASHIM_CONFIG → a frozen Config.

Search order (first hit wins): CUDASHIM_CONFIG / an explicit path; from the script's folder upward,
in each folder `cudashim.toml` then a `pyproject.toml` holding [tool.cudashim]; the same from the
working directory. No file → the empty Config. Every malformed input raises ConfigError naming the
file, the key and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as _toml  # type: ignore[no-redef]

__all__ = ["Config", "PatchEntry", "PLATFORMS", "find_config_file", "load_config", "parse_config"]

PLATFORMS = ("ascend", "nvidia", "cpu")
_KEYS = ("platform", "patches", "disable")


@dataclass(frozen=True)
class PatchEntry:
    """One line of a patch map: target "module:symbol" → replacement "module:symbol"."""

    target: str
    replacement: str
    platform: str | None  # None: every platform
    source: str  # "path/to/pyproject.toml:patches.cpu" or "built-in:<pack>"


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    platform: str | None = None
    patches: tuple[PatchEntry, ...] = ()
    disable: frozenset[str] = field(default_factory=frozenset)

    def patches_for(self, platform: str) -> tuple[PatchEntry, ...]:
        return tuple(p for p in self.patches if p.platform in (None, platform))


def _has_tool_section(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    # cheap textual check first; parse errors are reported when the file is really loaded
    return "[tool.cudashim" in text


def find_config_file(start: Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    env = os.environ if environ is None else environ
    explicit = env.get("CUDASHIM_CONFIG")
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"CUDASHIM_CONFIG={explicit!r}: no such file; point it at a cudashim.toml or pyproject.toml, or unset it")
        return p
    roots = [start.resolve()] if start is not None else []
    roots.append(Path.cwd().resolve())
    seen: set[Path] = set()
    for root in roots:
        for folder in (root, *root.parents):
            if folder in seen:
                break
            seen.add(folder)
            own = folder / "cudashim.toml"
            if own.is_file():
                return own
            pyproject = folder / "pyproject.toml"
            if pyproject.is_file() and _has_tool_section(pyproject):
                return pyproject
    return None


def _fail(path: Path, key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{path}: [{key}] {problem}; {fix}")


def _check_ref(path: Path, key: str, ref: Any, what: str) -> str:
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise _fail(path, key, f"{what} {ref!r} is not of the form \"module:symbol\"",
                    'write it as "package.module:symbol"')
    mod, sym = ref.split(":")
    if not mod or not sym or not all(p.isidentifier() for p in mod.split(".")) or not all(
        p.isidentifier() for p in sym.split(".")
    ):
        raise _fail(path, key, f"{what} {ref!r} is not a valid module path and symbol",
                    'use dotted identifiers, e.g. "flash_attn:flash_attn_varlen_func"')
    return ref


def parse_config(data: Mapping[str, Any], path: Path) -> Config:
    """Validate the [tool.cudashim] table (already extracted) from `path`."""
    if not isinstance(data, Mapping):
        raise _fail(path, "tool.cudashim", "is not a table", "write it as a [tool.cudashim] section")
    for key in data:
        if key not in _KEYS:
            raise _fail(path, f"tool.cudashim.{key}", "unknown key", f"use one of {', '.join(_KEYS)}")
    platform = data.get("platform")
    if platform is not None and platform not in PLATFORMS:
        raise _fail(path, "tool.cudashim.platform", f"{platform!r} is not a platform", f"use one of {', '.join(PLATFORMS)}")
    patches: list[PatchEntry] = []
    raw_patches = data.get("patches", {})
    if not isinstance(raw_patches, Mapping):
        raise _fail(path, "tool.cudashim.patches", "is not a table", 'write entries as "module:symbol" = "replacement.module:symbol"')
    seen: dict[tuple[str, str | None], str] = {}

    def add(target: Any, repl: Any, plat: str | None, key: str) -> None:
        _check_ref(path, key, target, "target")
        _check_ref(path, key, repl, "replacement")
        if (target, plat) in seen:
            raise _fail(path, key, f"target {target!r} is given twice (also at {seen[(target, plat)]})", "keep one of the two lines")
        seen[(target, plat)] = key
        patches.append(PatchEntry(target, repl, plat, f"{path}:{key}"))

    for k, v in raw_patches.items():
        if k in PLATFORMS:
            if not isinstance(v, Mapping):
                raise _fail(path, f"tool.cudashim.patches.{k}", "is not a table", f"write it as [tool.cudashim.patches.{k}]")
            for tk, tv in v.items():
                add(tk, tv, k, f"tool.cudashim.patches.{k}.\"{tk}\"")
        elif isinstance(v, Mapping):
            raise _fail(path, f"tool.cudashim.patches.{k}", f"{k!r} is not a platform sub-table", f"use one of {', '.join(PLATFORMS)}")
        else:
            add(k, v, None, f"tool.cudashim.patches.\"{k}\"")
    disable = data.get("disable", [])
    if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
        raise _fail(path, "tool.cudashim.disable", f"{disable!r} is not a list of strings", 'write it as disable = ["module:symbol", "pack-name"]')
    return Config(path=path, platform=platform, patches=tuple(patches), disable=frozenset(disable))


def load_config(start: Path | None = None, path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Find and parse the config; `path` (e.g. `run --config`) wins over the search."""
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"--config {path}: no such file; give the path of a cudashim.toml or pyproject.toml")
    found = Path(path) if path is not None else find_config_file(start, environ)
    if found is None:
        return Config()
    try:
        with open(found, "rb") as f:
            doc = _toml.load(f)
    except _toml.TOMLDecodeError as e:
        raise ConfigError(f"{found}: not valid TOML ({e}); fix the syntax at that line") from None
    except OSError as e:
        raise ConfigError(f"{found}: cannot be read ({e.strerror}); check the path and its permissions") from None
    if found.name == "pyproject.toml":
        table = doc.get("tool", {}).get("cudashim", {})
        return parse_config(table, found)
    # cudashim.toml: keys at top level, or under [tool.cudashim] for symmetry
    table = doc.get("tool", {}).get("cudashim", doc) if "tool" in doc else doc
    return parse_config(table, found)
