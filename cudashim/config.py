"""[tool.cudashim] in the nearest pyproject.toml, or cudashim.toml, or CUDASHIM_CONFIG → a frozen Config.

Keys: `platform`; `patches` ("module:symbol" = "replacement.module:symbol", optionally under a
per-platform sub-table [tool.cudashim.patches.ascend|cpu|nvidia]); `disable` (patch targets or
built-in pack names). CUDASHIM_DISABLE_PATCHES=key,... adds to `disable` from the environment.

Search order (first hit wins): CUDASHIM_CONFIG / an explicit path; from the script's folder upward,
in each folder `cudashim.toml` then a `pyproject.toml` holding [tool.cudashim]; the same from the
working directory. No file → the empty Config. Every malformed input raises ConfigError naming the
file, the key and the fix.
"""

import os

from . import envs
from .envs import _Record as Record

# Every shimmed interpreter runs load_config() before user code, and almost always finds no file:
# that path uses os.path only. pathlib, tomllib and importlib are imported by the functions that read
# and check a found file, cudashim.errors where an error is raised, and dataclasses, typing and
# `from __future__ import annotations` not at all (Record; annotations naming Path or typing's names
# are strings). Plain data: no detection, no platform names and no built-in packs; what names a
# platform or a pack is checked where those live (cudashim.platform.resolve_platform_name checks
# `platform`, cudashim.patches.check_config the sub-tables and `disable`), with the same file/key errors.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path
    from typing import Any, Mapping

    from .errors import ConfigError

__all__ = [
    "Config",
    "PatchEntry",
    "find_config_file",
    "load_config",
    "read_config",
    "parse_config",
]

_KEYS = ("platform", "patches", "disable")

class PatchEntry(Record):
    """One line of a patch map: target "module:symbol" → replacement "module:symbol"."""

    __slots__ = ("target", "replacement", "platform", "source")
    target: str
    replacement: str
    platform: str | None  # None: every platform
    source: str  # "path/to/pyproject.toml:patches.cpu" or "built-in:<pack>"


class Config(Record):
    """Config(path=None, platform=None, patches=(), disable=frozenset())."""

    __slots__ = ("path", "platform", "patches", "disable", "env_disable")
    _defaults = {"path": None, "platform": None, "patches": (), "disable": frozenset(), "env_disable": frozenset()}
    path: "Path | None"
    platform: str | None
    patches: tuple[PatchEntry, ...]
    disable: frozenset[str]  # the file's `disable` and CUDASHIM_DISABLE_PATCHES together
    env_disable: frozenset[str]  # what CUDASHIM_DISABLE_PATCHES added (error messages name the source)

    def patches_for(self, platform: str) -> tuple[PatchEntry, ...]:
        return tuple(p for p in self.patches if p.platform in (None, platform))


def _as_path(path: str | os.PathLike[str]) -> "Path":
    from pathlib import Path

    return Path(path)


def _has_tool_section(pyproject: str) -> bool:
    try:
        with open(pyproject, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    # cheap textual check first; parse errors are reported when the file is really loaded
    return "[tool.cudashim" in text


def _search(start: str | os.PathLike[str] | None) -> str | None:
    """The first config file from `start` upward, then from the working directory upward."""
    roots = [os.path.realpath(os.fspath(start))] if start is not None else []
    # getcwd() is already free of symlinks (POSIX), so realpath would hand it back unchanged; it is
    # pure-Python and its first call in a process costs more than the search itself
    roots.append(os.getcwd())
    seen: set[str] = set()
    for folder in roots:
        while folder not in seen:
            seen.add(folder)
            own = os.path.join(folder, "cudashim.toml")
            if os.path.isfile(own):
                return own
            pyproject = os.path.join(folder, "pyproject.toml")
            if os.path.isfile(pyproject) and _has_tool_section(pyproject):
                return pyproject
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def find_config_file(start: str | os.PathLike[str] | None = None,
                     environ: "Mapping[str, str] | None" = None) -> "Path | None":
    env = os.environ if environ is None else environ
    explicit = env.get("CUDASHIM_CONFIG")
    if explicit:
        if not os.path.isfile(explicit):
            from .errors import ConfigError

            raise ConfigError(f"CUDASHIM_CONFIG={explicit!r}: no such file; point it at a cudashim.toml or pyproject.toml, or unset it")
        return _as_path(explicit)
    found = _search(start)
    return None if found is None else _as_path(found)


def _with_env_disable(config: Config, environ: "Mapping[str, str] | None") -> Config:
    extra = envs.get("CUDASHIM_DISABLE_PATCHES", environ)
    if not extra:
        return config
    # whether each name means anything is cudashim.patches' to say (it holds the built-in packs)
    return config._replace(disable=config.disable | frozenset(extra),  # type: ignore[return-value]
                           env_disable=frozenset(extra))


def load_config(start: str | os.PathLike[str] | None = None, path: str | os.PathLike[str] | None = None,
                environ: "Mapping[str, str] | None" = None) -> Config:
    """Find and parse the config; `path` (e.g. `run --config`) wins over the search."""
    if path is not None and not os.path.isfile(os.fspath(path)):
        from .errors import ConfigError

        raise ConfigError(f"--config {path}: no such file; give the path of a cudashim.toml or pyproject.toml")
    found = _as_path(path) if path is not None else find_config_file(start, environ)
    if found is None:
        return _with_env_disable(Config(), environ)
    return _with_env_disable(read_config(found), environ)


# ---------------------------------------------------------------------------------------------------
# Reading and checking a found file (almost no shimmed start-up gets here). Every malformed input
# raises ConfigError naming the file, the key and the fix.

def read_config(found: "Path") -> Config:
    """The Config of the file `found` (its [tool.cudashim] table, or a cudashim.toml's top level)."""
    try:
        import tomllib as _toml
    except ModuleNotFoundError:  # pragma: no cover - 3.10
        import tomli as _toml  # type: ignore[no-redef]

    try:
        with open(found, "rb") as f:
            doc = _toml.load(f)
    except _toml.TOMLDecodeError as e:
        from .errors import ConfigError

        raise ConfigError(f"{found}: not valid TOML ({e}); fix the syntax at that line") from None
    except OSError as e:
        from .errors import ConfigError

        raise ConfigError(f"{found}: cannot be read ({e.strerror}); check the path and its permissions") from None
    if found.name == "pyproject.toml":
        table = doc.get("tool", {}).get("cudashim", {})
    else:  # cudashim.toml: keys at top level, or under [tool.cudashim] for symmetry
        table = doc.get("tool", {}).get("cudashim", doc) if "tool" in doc else doc
    return parse_config(table, found)


def _fail(path: "Path", key: str, problem: str, fix: str) -> "ConfigError":
    from .errors import ConfigError

    return ConfigError(f"{path}: [{key}] {problem}; {fix}")


def _check_ref(path: "Path", key: str, ref: "Any", what: str) -> str:
    if not isinstance(ref, str):
        raise _fail(path, key, f"{what} {ref!r} is a {type(ref).__name__}, not a string",
                    'quote it: "package.module:symbol"')
    if ref.count(":") != 1:
        raise _fail(path, key, f"{what} {ref!r} is not of the form \"module:symbol\"",
                    'write it as "package.module:symbol"')
    mod, sym = ref.split(":")
    if not mod or not sym or not all(p.isidentifier() for p in mod.split(".")) or not all(
        p.isidentifier() for p in sym.split(".")
    ):
        raise _fail(path, key, f"{what} {ref!r} is not a valid module path and symbol",
                    'use dotted identifiers without spaces, e.g. "flash_attn:flash_attn_varlen_func"')
    return ref


def _importable(top: str, folders: "list[Path]") -> bool:
    """Cheap existence check of a top-level module: find_spec only, nothing is imported."""
    import importlib.machinery
    import importlib.util

    try:
        if importlib.util.find_spec(top) is not None:
            return True
    except (ImportError, ValueError):
        return False
    # a project-local replacement next to the config file: sys.path does not hold its folder yet
    # while the bootstrap runs (site import comes before the script's folder is put on sys.path)
    return importlib.machinery.PathFinder.find_spec(top, [str(f) for f in folders]) is not None


def _check_replacement(path: "Path", key: str, target: str, repl: str) -> None:
    if repl == target:
        raise _fail(path, key, f"{target!r} is replaced by itself", "point it at a different module:symbol, or delete the line")
    top = repl.split(":")[0].split(".")[0]
    if not _importable(top, [path.parent, _as_path(os.getcwd())]):
        raise _fail(path, key, f"replacement {repl!r} cannot exist: no module named {top!r} is importable",
                    f"install {top!r} or put it on PYTHONPATH, or fix the module path")


def parse_config(data: "Mapping[str, Any]", path: "Path") -> Config:
    """Validate the [tool.cudashim] table (already extracted) from `path`."""
    from collections.abc import Mapping

    if not isinstance(data, Mapping):
        raise _fail(path, "tool.cudashim", "is not a table", "write it as a [tool.cudashim] section")
    for key in data:
        if key not in _KEYS:
            raise _fail(path, f"tool.cudashim.{key}", "unknown key", f"use one of {', '.join(_KEYS)}")
    platform = data.get("platform")
    if platform is not None and not isinstance(platform, str):
        raise _fail(path, "tool.cudashim.platform", f"{platform!r} is a {type(platform).__name__}, not a string",
                    'write platform = "cpu" (a platform name: see cudashim.platform.PLATFORMS)')
    patches: list[PatchEntry] = []
    raw_patches = data.get("patches", {})
    if not isinstance(raw_patches, Mapping):
        raise _fail(path, "tool.cudashim.patches", "is not a table", 'write entries as "module:symbol" = "replacement.module:symbol"')
    # target -> key of its line: a target may appear once for all platforms, or once per platform
    generic: dict[str, str] = {}
    specific: dict[tuple[str, str], str] = {}

    def add(target: "Any", repl: "Any", plat: "str | None", key: str) -> None:
        _check_ref(path, key, target, "target")
        _check_ref(path, key, repl, "replacement")
        if target.split(":")[0].split(".")[0] == "cudashim":
            raise _fail(path, key, f"target {target!r} is part of cudashim itself", "patch the CUDA-only module the program imports, not the shim")
        if plat is None:
            other = generic.get(target) or next((k for (t, _), k in specific.items() if t == target), None)
        else:
            other = generic.get(target) or specific.get((target, plat))
        if other is not None:
            raise _fail(path, key, f"target {target!r} is given twice (also at [{other}])",
                        "keep one line per target: either for every platform or under each platform sub-table")
        if plat is None:
            generic[target] = key
        else:
            specific[(target, plat)] = key
        _check_replacement(path, key, target, repl)
        patches.append(PatchEntry(target, repl, plat, f"{path}:{key}"))

    for k, v in raw_patches.items():
        if isinstance(v, Mapping):  # a per-platform sub-table; whether k names a platform is checked
            for tk, tv in v.items():  # where the names are known (cudashim.patches.check_config)
                add(tk, tv, k, f"tool.cudashim.patches.{k}.\"{tk}\"")
        elif str(k).isidentifier():  # a bare name, not a "module:symbol" target: meant as a sub-table
            raise _fail(path, f"tool.cudashim.patches.{k}", "is not a table", f"write it as [tool.cudashim.patches.{k}]")
        else:
            add(k, v, None, f"tool.cudashim.patches.\"{k}\"")
    disable = data.get("disable", [])
    if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
        raise _fail(path, "tool.cudashim.disable", f"{disable!r} is not a list of strings", 'write it as disable = ["module:symbol", "pack-name"]')
    return Config(path=path, platform=platform, patches=tuple(patches), disable=frozenset(disable))
