"""[tool.cudashim] in the nearest pyproject.toml, or cudashim.toml, or CUDASHIM_CONFIG → a frozen Config.

Keys: `platform`; `patches` ("module:symbol" = "replacement.module:symbol", optionally under a
per-platform sub-table [tool.cudashim.patches.ascend|cpu|nvidia]); `disable` (patch targets or
built-in pack names). CUDASHIM_DISABLE_PATCHES=key,... adds to `disable` from the environment.

Search order (first hit wins): CUDASHIM_CONFIG / an explicit path; from the script's folder (the
working directory for -m/-c/executables) upward, in each folder `cudashim.toml` then a
`pyproject.toml` holding [tool.cudashim], stopping at the project root: the first folder holding
.git or a pyproject.toml (docs/design.md §5: config comes from the project being run, never from above
it). No file → the empty Config. Every malformed input raises ConfigError naming the file, the key
and the fix; standard-library and cudashim targets are refused unless `allow_protected_targets = true`.
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
    "explain_config",
    "load_config",
    "read_config",
    "parse_config",
]

_KEYS = ("platform", "patches", "disable", "allow_protected_targets")

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


_CHUNK = 1 << 16
_TABLE = b"[tool.cudashim"
# A pyproject.toml at least this large is scanned once per version of the file: a table can be
# anywhere in TOML, so finding none means reading the whole file, which no start-up should repeat.
# Its answer is kept under the user's cache folder, keyed by the file's identity and change stamps
# (device, inode, size, modification and change times in ns: any write changes the change time).
_KEEP = 1 << 20
_KEPT_LINES = 64


def _scan(pyproject: str) -> bool:
    """Whether the file holds a [tool.cudashim...] header, read as bytes 64 KiB at a time up to the first."""
    tail = b""
    try:
        with open(pyproject, "rb") as f:
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    return False
                if _TABLE in tail + chunk[: len(_TABLE)] or _TABLE in chunk:
                    return True
                tail = chunk[-len(_TABLE):]
    except OSError:
        return False


def _scans_file() -> str | None:
    """Where the answers for large pyproject.toml files are kept (None: no cache folder to keep them in)."""
    root = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME") else "")
    return os.path.join(root, "cudashim", "pyproject-scans") if root else None


def _has_tool_section(pyproject: str) -> bool:
    """Whether the file holds a [tool.cudashim...] header, without decoding or holding it whole.

    Most pyproject.toml files met on the way are not ours: they are scanned as bytes, 64 KiB at a
    time (a huge or non-UTF-8 file costs neither memory nor an error), and parsed only when the
    header is there; its syntax errors are reported then. A large one is scanned once per version
    (_KEEP): later starts read its kept answer instead.
    """
    try:
        st = os.stat(pyproject)
    except OSError:
        return False
    kept = _scans_file() if st.st_size >= _KEEP and "\t" not in pyproject and "\n" not in pyproject else None
    if kept is None:
        return _scan(pyproject)
    key = f"{pyproject}\t{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}\t"
    lines: list[str] = []
    try:
        with open(kept, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        pass
    for line in lines:
        if line.startswith(key):
            return line[len(key):] == "1"
    found = _scan(pyproject)
    lines = [ln for ln in lines if not ln.startswith(pyproject + "\t")][-(_KEPT_LINES - 1):] + [key + ("1" if found else "0")]
    tmp = f"{kept}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, kept)  # whole or not at all for a start reading it meanwhile
    except OSError:  # a read-only home: every start scans, as before
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return found


_ROOT_MARKS = (".git", "pyproject.toml")


def _search(start: str | os.PathLike[str] | None) -> tuple[str | None, str, str | None]:
    """(config file or None, folder searched from, project root or None) — docs/design.md §5's trust rule.

    From `start` (the script's folder; the working directory when None, as for -m/-c/executables)
    upward, in each folder cudashim.toml then a pyproject.toml holding [tool.cudashim]; the search
    stops at the project root, the first folder holding .git or a pyproject.toml. A file above the
    project (a shared /tmp, a home folder, a hostile checkout's parent) is never read.
    """
    # getcwd() is already free of symlinks (POSIX), so realpath would hand it back unchanged; it is
    # pure-Python and its first call in a process costs more than the search itself
    origin = os.path.realpath(os.fspath(start)) if start is not None else os.getcwd()
    folder = origin
    while True:
        own = os.path.join(folder, "cudashim.toml")
        if os.path.isfile(own):
            return own, origin, None
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject):
            return (pyproject if _has_tool_section(pyproject) else None), origin, folder
        if os.path.exists(os.path.join(folder, ".git")):
            return None, origin, folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None, origin, None
        folder = parent


def explain_config(start: str | os.PathLike[str] | None = None, path: str | os.PathLike[str] | None = None,
                   environ: "Mapping[str, str] | None" = None) -> tuple[str | None, str]:
    """(config file or None, why that one): what `cudashim doctor` and `cudashim patches` print."""
    if path is not None:
        return os.fspath(path), "given by --config"
    env = os.environ if environ is None else environ
    explicit = env.get("CUDASHIM_CONFIG")
    if explicit:
        return explicit, "CUDASHIM_CONFIG names it (set by you, or pinned by the process that started this one)"
    found, origin, root = _search(start)
    what = "the script's folder" if start is not None else "the working directory"
    bound = (f"up to the project root {root} (it holds {'pyproject.toml' if os.path.isfile(os.path.join(root, 'pyproject.toml')) else '.git'})"
             if root is not None else "up to / (no project root: no folder holds .git or pyproject.toml)")
    if found is None:
        return None, f"none found: searched from {origin} ({what}) {bound}; nothing above the project root is read"
    return found, (f"the nearest one searching upward from {origin} ({what}); the search stops at the project "
                   f"root, the first folder holding .git or a pyproject.toml")


def find_config_file(start: str | os.PathLike[str] | None = None,
                     environ: "Mapping[str, str] | None" = None) -> "Path | None":
    env = os.environ if environ is None else environ
    explicit = env.get("CUDASHIM_CONFIG")
    if explicit:
        if not os.path.isfile(explicit):
            from .errors import ConfigError

            raise ConfigError(f"CUDASHIM_CONFIG={explicit!r}: no such file; point it at a cudashim.toml or pyproject.toml, or unset it")
        return _as_path(explicit)
    found = _search(start)[0]
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
    except UnicodeDecodeError as e:
        from .errors import ConfigError

        raise ConfigError(f"{found}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                          f"TOML files are UTF-8: save it as UTF-8") from None
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


def _check_replacement(path: "Path", key: str, target: str, repl: str) -> None:
    """The replacement's module found and its symbol seen in its source, without running either."""
    if repl == target:
        raise _fail(path, key, f"{target!r} is replaced by itself", "point it at a different module:symbol, or delete the line")
    from ._locate import UNKNOWN, locate, missing

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
    import sys

    if top in sys.stdlib_module_names:
        return "is in the standard library (every Python process of the project, pip included, would run the replacement)"
    return None


def _check_graph(path: "Path", patches: "list[PatchEntry]") -> None:
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
            from .errors import ConfigError

            raise ConfigError(f"{path}: patch cycle {' -> '.join([*names, cur.target])}: each line replaces "
                              f"another's target, so none of them applies; delete one line of the cycle")
        from .errors import ConfigError

        raise ConfigError(f"{path}: patch chain {' -> '.join([*names, chain[-1].replacement])}: {p.target!r} is "
                          f"replaced by {p.replacement!r}, which is itself patched; point {p.target!r} at "
                          f"{chain[-1].replacement!r} directly, or delete one line")


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
        if isinstance(v, Mapping):  # a per-platform sub-table; whether k names a platform is checked
            for tk, tv in v.items():  # where the names are known (cudashim.patches.check_config)
                add(tk, tv, k, f"tool.cudashim.patches.{k}.\"{tk}\"")
        elif str(k).isidentifier():  # a bare name, not a "module:symbol" target: meant as a sub-table
            raise _fail(path, f"tool.cudashim.patches.{k}", "is not a table", f"write it as [tool.cudashim.patches.{k}]")
        else:
            add(k, v, None, f"tool.cudashim.patches.\"{k}\"")
    allow = data.get(_PROTECT_KEY, False)
    if not isinstance(allow, bool):
        raise _fail(path, f"tool.cudashim.{_PROTECT_KEY}", f"{allow!r} is not a boolean", f"write {_PROTECT_KEY} = true or delete it")
    _check_graph(path, patches)
    disable = data.get("disable", [])
    if not isinstance(disable, list) or not all(isinstance(d, str) for d in disable):
        raise _fail(path, "tool.cudashim.disable", f"{disable!r} is not a list of strings", 'write it as disable = ["module:symbol", "pack-name"]')
    return Config(path=path, platform=platform, patches=tuple(patches), disable=frozenset(disable))
