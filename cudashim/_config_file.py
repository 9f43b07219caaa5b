"""Reading and checking a config file: the TOML of a found cudashim.toml / pyproject.toml → Config.

cudashim.config finds the file (and almost every shimmed start-up finds none); this module, with
tomllib and the checks of every key, loads only when there is a file to read or a `disable` name
to check. Every malformed input raises ConfigError naming the file, the key and the fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import _KEYS, PACKS, PLATFORMS, Config, PatchEntry, _as_path
from .errors import ConfigError

__all__ = ["read_config", "parse_config", "known_disable_names", "unknown_disable"]


def read_config(found: Path) -> Config:
    """The Config of the file `found` (its [tool.cudashim] table, or a cudashim.toml's top level)."""
    try:
        import tomllib as _toml
    except ModuleNotFoundError:  # pragma: no cover - 3.10
        import tomli as _toml  # type: ignore[no-redef]

    try:
        with open(found, "rb") as f:
            doc = _toml.load(f)
    except _toml.TOMLDecodeError as e:
        raise ConfigError(f"{found}: not valid TOML ({e}); fix the syntax at that line") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{found}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                          f"TOML files are UTF-8: save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{found}: cannot be read ({e.strerror}); check the path and its permissions") from None
    if found.name == "pyproject.toml":
        table = doc.get("tool", {}).get("cudashim", {})
    else:  # cudashim.toml: keys at top level, or under [tool.cudashim] for symmetry
        table = doc.get("tool", {}).get("cudashim", doc) if "tool" in doc else doc
    return parse_config(table, found)


def _fail(path: Path, key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{path}: [{key}] {problem}; {fix}")


def _check_ref(path: Path, key: str, ref: Any, what: str) -> str:
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


def _importable(top: str, folders: list[Path]) -> bool:
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


def _check_replacement(path: Path, key: str, target: str, repl: str) -> None:
    if repl == target:
        raise _fail(path, key, f"{target!r} is replaced by itself", "point it at a different module:symbol, or delete the line")
    top = repl.split(":")[0].split(".")[0]
    if not _importable(top, [path.parent, _as_path(os.getcwd())]):
        raise _fail(path, key, f"replacement {repl!r} cannot exist: no module named {top!r} is importable",
                    f"install {top!r} or put it on PYTHONPATH, or fix the module path")


def known_disable_names(patches: tuple[PatchEntry, ...]) -> set[str]:
    known = set(PACKS)
    for mapping in PACKS.values():
        known.update(mapping)
    known.update(p.target for p in patches)
    return known


def unknown_disable(name: str) -> tuple[str, str]:
    """(problem, fix) for a disable entry that names nothing."""
    return (f"{name!r} names neither a built-in pack ({', '.join(PACKS)}) nor a patch target",
            "use a pack name or a \"module:symbol\" that a pack or the patches table defines")


def parse_config(data: Mapping[str, Any], path: Path) -> Config:
    """Validate the [tool.cudashim] table (already extracted) from `path`."""
    if not isinstance(data, Mapping):
        raise _fail(path, "tool.cudashim", "is not a table", "write it as a [tool.cudashim] section")
    for key in data:
        if key not in _KEYS:
            raise _fail(path, f"tool.cudashim.{key}", "unknown key", f"use one of {', '.join(_KEYS)}")
    platform = data.get("platform")
    if platform is not None and not isinstance(platform, str):
        raise _fail(path, "tool.cudashim.platform", f"{platform!r} is a {type(platform).__name__}, not a string",
                    f'write platform = "cpu" (one of {", ".join(PLATFORMS)})')
    if platform is not None and platform not in PLATFORMS:
        raise _fail(path, "tool.cudashim.platform", f"{platform!r} is not a platform", f"use one of {', '.join(PLATFORMS)}")
    patches: list[PatchEntry] = []
    raw_patches = data.get("patches", {})
    if not isinstance(raw_patches, Mapping):
        raise _fail(path, "tool.cudashim.patches", "is not a table", 'write entries as "module:symbol" = "replacement.module:symbol"')
    # target -> key of its line: a target may appear once for all platforms, or once per platform
    generic: dict[str, str] = {}
    specific: dict[tuple[str, str], str] = {}

    def add(target: Any, repl: Any, plat: str | None, key: str) -> None:
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
    known = known_disable_names(tuple(patches))
    for name in disable:
        if name not in known:
            raise _fail(path, "tool.cudashim.disable", *unknown_disable(name))
    return Config(path=path, platform=platform, patches=tuple(patches), disable=frozenset(disable))
