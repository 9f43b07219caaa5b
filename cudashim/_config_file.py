"""Reading and checking a config file: the TOML of a found cudashim.toml / pyproject.toml → Config.

cudashim.config finds the file (and almost every shimmed start-up finds none); this module, with
tomllib and the checks of every key, loads only when there is a file to read or a `disable` name
to check. Every malformed input raises ConfigError naming the file, the key and the fix.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import _KEYS, PACKS, PLATFORMS, Config, PatchEntry
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


def _check_replacement(path: Path, key: str, target: str, repl: str) -> None:
    """The replacement's module found and its symbol seen in its source, without running either."""
    if repl == target:
        raise _fail(path, key, f"{target!r} is replaced by itself", "point it at a different module:symbol, or delete the line")
    from ._replacements import UNKNOWN, locate, missing

    module, _, symbol = repl.partition(":")
    spec, why = locate(module, str(path.parent))
    if spec is None:
        raise _fail(path, key, f"replacement {repl!r} cannot be imported: {why}",
                    f"fix the module path, or put the module beside {path.name} or on PYTHONPATH")
    problem = missing(spec, symbol)
    if problem is not None and problem != UNKNOWN:
        raise _fail(path, key, f"replacement {repl!r} has no {symbol.split('.')[0]!r}: {problem}",
                    "fix the symbol's name (a typo?) or define it in that module")


# Targets that would reach every Python process of the project, including pip and the tools it runs,
# rather than the CUDA-only code a patch is for: refused unless the config opts in explicitly.
_PROTECT_KEY = "allow_protected_targets"


def _protected(target: str) -> str | None:
    top = target.split(":")[0].split(".")[0]
    if top == "cudashim":
        return "is part of cudashim itself"
    if top in sys.stdlib_module_names:
        return "is in the standard library (every Python process of the project, pip included, would run the replacement)"
    return None


def _check_graph(path: Path, patches: list[PatchEntry]) -> None:
    """No replacement may itself be a patched target of the same config: a cycle voids its patches,
    and a chain a -> b -> c would follow b's replacement silently. Built-in packs' targets do not
    count: a replacement may name flash_attn's functions, which on cpu resolve to cudashim's."""
    by_target: dict[str, list[PatchEntry]] = {}
    for p in patches:
        by_target.setdefault(p.target, []).append(p)

    def next_of(entry: PatchEntry) -> PatchEntry | None:
        return next((q for q in by_target.get(entry.replacement, ())
                     if entry.platform is None or q.platform is None or q.platform == entry.platform), None)

    for p in patches:
        cur = next_of(p)
        if cur is None:
            continue
        chain = [p]
        while cur is not None and cur not in chain:
            chain.append(cur)
            cur = next_of(cur)
        names = [e.target for e in chain]
        if cur is not None:
            raise ConfigError(f"{path}: patch cycle {' -> '.join([*names, cur.target])}: each line replaces "
                              f"another's target, so none of them applies; delete one line of the cycle")
        raise ConfigError(f"{path}: patch chain {' -> '.join([*names, chain[-1].replacement])}: {p.target!r} is "
                          f"replaced by {p.replacement!r}, which is itself patched; point {p.target!r} at "
                          f"{chain[-1].replacement!r} directly, or delete one line")


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
        protected = _protected(target)
        if protected is not None and data.get(_PROTECT_KEY) is not True:
            raise _fail(path, key, f"target {target!r} {protected}; refused by default",
                        f"patch the CUDA-only module the program imports, or, if this project really means it, "
                        f"set {_PROTECT_KEY} = true in the same table")
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
    allow = data.get(_PROTECT_KEY, False)
    if not isinstance(allow, bool):
        raise _fail(path, f"tool.cudashim.{_PROTECT_KEY}", f"{allow!r} is not a boolean", f"write {_PROTECT_KEY} = true or delete it")
    _check_graph(path, patches)
    disable = data.get("disable", [])
    if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
        raise _fail(path, "tool.cudashim.disable", f"{disable!r} is not a list of strings", 'write it as disable = ["module:symbol", "pack-name"]')
    known = known_disable_names(tuple(patches))
    for name in disable:
        if name not in known:
            raise _fail(path, "tool.cudashim.disable", *unknown_disable(name))
    return Config(path=path, platform=platform, patches=tuple(patches), disable=frozenset(disable))
