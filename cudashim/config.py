"""[tool.cudashim] in the nearest pyproject.toml, or cudashim.toml, or CUDASHIM_CONFIG → a frozen Config.

Keys: `platform`; `patches` ("module:symbol" = "replacement.module:symbol", optionally under a
per-platform sub-table [tool.cudashim.patches.ascend|cpu|nvidia]); `disable` (patch targets or
built-in pack names). CUDASHIM_DISABLE_PATCHES=key,... adds to `disable` from the environment.

Search order (first hit wins): CUDASHIM_CONFIG / an explicit path; from the script's folder (the
working directory for -m/-c/executables) upward, in each folder `cudashim.toml` then a
`pyproject.toml` holding [tool.cudashim], stopping at the project root: the first folder holding
.git or a pyproject.toml (DESIGN.md §5: config comes from the project being run, never from above
it). No file → the empty Config. Every malformed input raises ConfigError naming the file, the key
and the fix; standard-library and cudashim targets are refused unless `allow_protected_targets = true`.
"""

import os

from . import envs
from .envs import _Record as Record

# Every shimmed interpreter runs load_config() before user code, and almost always finds no file:
# that path uses os.path only. Reading and checking a found file is cudashim._config_file's (with
# pathlib and tomllib), cudashim.errors is imported where an error is raised, and dataclasses, typing
# and `from __future__ import annotations` not at all (Record; annotations naming Path or typing's
# names are strings).
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path
    from typing import Any, Mapping

    from .errors import ConfigError

__all__ = [
    "PACKS",
    "target_modules",
    "Config",
    "PatchEntry",
    "PLATFORMS",
    "find_config_file",
    "explain_config",
    "load_config",
    "parse_config",
    "resolve_platform_name",
]

PLATFORMS = ("ascend", "nvidia", "cpu")
_KEYS = ("platform", "patches", "disable", "allow_protected_targets")

# ---------------------------------------------------------------------------------------------------
# Built-in patch packs, as data: CUDA-only symbols the shim knows how to replace, the patch maps every
# project gets beside its own (cudashim.patches applies both; re-exported there).
#
# A pack is switched off as a whole by naming it in `disable` (config) or CUDASHIM_DISABLE_PATCHES;
# a single target by naming its "module:symbol".
# On `nvidia` a built-in patch applies only where its target module is not installed (the real
# kernel wins); on `cpu` and `ascend` it always applies.

_FA = "cudashim.npu_ops.flash_attn"

PACKS: dict[str, dict[str, str]] = {
    "flash_attn": {
        "flash_attn:flash_attn_func": f"{_FA}:flash_attn_func",
        "flash_attn:flash_attn_varlen_func": f"{_FA}:flash_attn_varlen_func",
        "flash_attn:flash_attn_with_kvcache": f"{_FA}:flash_attn_with_kvcache",
        "flash_attn.flash_attn_interface:flash_attn_func": f"{_FA}:flash_attn_func",
        "flash_attn.flash_attn_interface:flash_attn_varlen_func": f"{_FA}:flash_attn_varlen_func",
        "flash_attn.flash_attn_interface:flash_attn_with_kvcache": f"{_FA}:flash_attn_with_kvcache",
    },
    "flash_attn_cute": {
        "flash_attn.cute.interface:_flash_attn_fwd": "cudashim.npu_ops.flash_attn_cute:_flash_attn_fwd",
    },
    "deep_select": {
        "deep_select.interface:topk": "cudashim.npu_ops.deep_select:topk",
    },
}


class PatchEntry(Record):
    """One line of a patch map: target "module:symbol" → replacement "module:symbol"."""

    __slots__ = ("target", "replacement", "platform", "source")
    target: str
    replacement: str
    platform: str | None  # None: every platform
    source: str  # "path/to/pyproject.toml:patches.cpu" or "built-in:<pack>"


class Config(Record):
    """Config(path=None, platform=None, patches=(), disable=frozenset())."""

    __slots__ = ("path", "platform", "patches", "disable")
    _defaults = {"path": None, "platform": None, "patches": (), "disable": frozenset()}
    path: "Path | None"
    platform: str | None
    patches: tuple[PatchEntry, ...]
    disable: frozenset[str]

    def patches_for(self, platform: str) -> tuple[PatchEntry, ...]:
        return tuple(p for p in self.patches if p.platform in (None, platform))


def target_modules(config: Config, platform: str, packages: bool = False) -> set[str]:
    """The modules holding a patch target active on `platform`: the built-in packs' and the config's,
    less what `disable` names; with `packages`, the packages above them too (looked up first)."""
    disabled = config.disable
    targets = {t for pack, mapping in PACKS.items() if pack not in disabled for t in mapping if t not in disabled}
    targets.update(e.target for e in config.patches_for(platform) if e.target not in disabled)
    modules = {t.split(":")[0] for t in targets}
    if packages:
        modules.update(m.rsplit(".", i)[0] for m in list(modules) for i in range(1, m.count(".") + 1))
    return modules


def _as_path(path: str | os.PathLike[str]) -> "Path":
    from pathlib import Path

    return Path(path)


_CHUNK = 1 << 16
_TABLE = b"[tool.cudashim"


def _has_tool_section(pyproject: str) -> bool:
    """Whether the file holds a [tool.cudashim...] header, without decoding or holding it whole.

    Most pyproject.toml files met on the way are not ours: they are scanned as bytes, 64 KiB at a
    time (a huge or non-UTF-8 file costs neither memory nor an error), and parsed only when the
    header is there; its syntax errors are reported then.
    """
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


_ROOT_MARKS = (".git", "pyproject.toml")


def _search(start: str | os.PathLike[str] | None) -> tuple[str | None, str, str | None]:
    """(config file or None, folder searched from, project root or None) — DESIGN.md §5's trust rule.

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


def __getattr__(name: str) -> "Any":
    if name == "parse_config":  # public, with the rest of the file checks in cudashim._config_file
        from ._config_file import parse_config

        return parse_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _with_env_disable(config: Config, environ: "Mapping[str, str] | None") -> Config:
    extra = envs.get("CUDASHIM_DISABLE_PATCHES", environ)
    if not extra:
        return config
    from ._config_file import known_disable_names, unknown_disable

    known = known_disable_names(config.patches)
    for name in extra:  # type: ignore[union-attr]
        if name not in known:
            problem, fix = unknown_disable(name)
            where = f" (config: {config.path})" if config.path else ""
            from .errors import ConfigError

            raise ConfigError(f"CUDASHIM_DISABLE_PATCHES: {problem}{where}; {fix}, or unset it")
    return config._replace(disable=config.disable | frozenset(extra))  # type: ignore[return-value]


def load_config(start: str | os.PathLike[str] | None = None, path: str | os.PathLike[str] | None = None,
                environ: "Mapping[str, str] | None" = None) -> Config:
    """Find and parse the config; `path` (e.g. `run --config`) wins over the search."""
    if path is not None and not os.path.isfile(os.fspath(path)):
        from .errors import ConfigError

        raise ConfigError(f"--config {path}: no such file; give the path of a cudashim.toml or pyproject.toml")
    found = _as_path(path) if path is not None else find_config_file(start, environ)
    if found is None:
        return _with_env_disable(Config(), environ)
    from ._config_file import read_config  # only a found file needs the TOML reader and the checks

    return _with_env_disable(read_config(found), environ)


# ---------------------------------------------------------------------------------------------------
# Which platform this process runs on. Here rather than in platform.py because the bootstrap asks it
# in every shimmed interpreter before user code, and platform.py's Platform classes need enum (with it
# functools, collections, re...), which the answer does not; and here rather than in a module of its
# own because the bootstrap imports this module anyway, while one module more costs ~0.1 ms of every
# shimmed start-up. cudashim.platform (and cudashim._platform_name) re-export it. No torch.

_FOUND = {"ascend": "an Ascend NPU was found", "nvidia": "an NVIDIA GPU was found",
          "cpu": "no Ascend NPU or NVIDIA GPU was found"}


def resolve_platform_name(config: "Any" = None, environ: "Mapping[str, str] | None" = None) -> tuple[str, str]:
    """(name, why): CUDASHIM_PLATFORM, else the config's `platform`, else hardware detection. No torch."""
    override = envs.get("CUDASHIM_PLATFORM", environ)
    if override:
        return str(override), f"CUDASHIM_PLATFORM={envs.raw('CUDASHIM_PLATFORM', environ)} overrides detection"
    if config is None:
        config = load_config(environ=environ)
    if getattr(config, "platform", None):
        return config.platform, f"platform = {config.platform!r} in {config.path}"
    from .hardware import accelerator_kind

    # an explicit environ is the whole environment: its CUDASHIM_SYSROOT (or '/'), not the process's
    root = (envs.get("CUDASHIM_SYSROOT", environ) or "/") if environ is not None else None
    kind = accelerator_kind(root)
    where = root or envs.get("CUDASHIM_SYSROOT") or "/"
    what = _FOUND.get(kind, f"detection said {kind!r}")
    return kind, f"{what} (hardware detection under {where}; checked in order ascend, nvidia, cpu)"
