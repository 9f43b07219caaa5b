"""Per-symbol patch maps: swap CUDA-only symbols when their modules load (DESIGN.md §5).

    PACKS, PLATFORM_MODE         the built-in patch packs and when they apply on each platform
    target_modules(config, p)    the modules holding a patch target active on platform p
    check_disable(config)        every `disable` name means a pack or a target (ConfigError if not)
    install(config, platform)    built-in packs + config patches for `platform`, through cudashim.importhook
    uninstall()                  every original back, stand-ins gone, watches dropped
    original("X:f")              the object X.f was before the shim patched it
    status()                     one dict per active patch: target, replacement, source, state, rebound
    plan(config, platform)       the (entry, mode) pairs install() would activate

This package face is data and names only: the bootstrap asks target_modules() in every shimmed
start-up. The registry (_patch), applying (_apply) and stand-ins (_standin) load on first use:
in a shimmed process, when the import hook first sees torch or a patch target looked up.
"""

from ..platform import PLATFORMS

# no importlib, typing or `from __future__ import annotations` here (each one more import): this
# package loads in every shimmed interpreter's start-up; annotations naming typing's names are strings
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from ..config import Config
    from ..errors import PatchError, StandInAttributeError
    from ._patch import MISSING, Patch, install, installed, original, plan, status, uninstall

__all__ = [
    "install",
    "uninstall",
    "installed",
    "original",
    "status",
    "plan",
    "PatchError",
    "StandInAttributeError",
    "PACKS",
    "PLATFORM_MODE",
    "ALWAYS",
    "ABSENT_ONLY",
    "pack_of",
    "target_modules",
    "check_disable",
]

# ---------------------------------------------------------------------------------------------------
# Built-in patch packs: CUDA-only symbols the shim knows how to replace, the patch maps every project
# gets beside its own. A pack is switched off as a whole by naming it in `disable` (config) or
# CUDASHIM_DISABLE_PATCHES; a single target by naming its "module:symbol".

_FA = "cudashim.npu_ops.flash_attn"

PACKS: "dict[str, dict[str, str]]" = {
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

ALWAYS = "always"
ABSENT_ONLY = "absent-only"

# platform -> when a built-in patch applies: on nvidia only where the target module is not installed
# (the real kernel wins); on cpu and ascend always
PLATFORM_MODE: "dict[str, str]" = {"ascend": ALWAYS, "cpu": ALWAYS, "nvidia": ABSENT_ONLY}
assert set(PLATFORM_MODE) == set(PLATFORMS), "every platform needs a mode for the built-in packs"


def pack_of(target: str) -> "str | None":
    """The built-in pack holding `target`, or None."""
    for name, mapping in PACKS.items():
        if target in mapping:
            return name
    return None


def check_disable(config: "Config") -> None:
    """Raise ConfigError naming the source when a `disable` name means neither a pack nor a target."""
    known = set(PACKS)
    for mapping in PACKS.values():
        known.update(mapping)
    known.update(p.target for p in config.patches)
    for name in sorted(config.disable - known):
        from ..errors import ConfigError

        problem = f"{name!r} names neither a built-in pack ({', '.join(PACKS)}) nor a patch target"
        fix = "use a pack name or a \"module:symbol\" that a pack or the patches table defines"
        if name in config.env_disable:
            where = f" (config: {config.path})" if config.path else ""
            raise ConfigError(f"CUDASHIM_DISABLE_PATCHES: {problem}{where}; {fix}, or unset it")
        raise ConfigError(f"{config.path}: [tool.cudashim.disable] {problem}; {fix}")


def target_modules(config: "Config", platform: str, packages: bool = False) -> "set[str]":
    """The modules holding a patch target active on `platform`: the built-in packs' and the config's,
    less what `disable` names; with `packages`, the packages above them too (looked up first).
    Checks the `disable` names first (check_disable)."""
    check_disable(config)
    disabled = config.disable
    targets = {t for pack, mapping in PACKS.items() if pack not in disabled for t in mapping if t not in disabled}
    targets.update(e.target for e in config.patches_for(platform) if e.target not in disabled)
    modules = {t.split(":")[0] for t in targets}
    if packages:
        modules.update(m.rsplit(".", i)[0] for m in list(modules) for i in range(1, m.count(".") + 1))
    return modules


_REGISTRY = ("install", "uninstall", "installed", "original", "status", "plan", "Patch", "MISSING")


def __getattr__(name: str) -> "Any":
    # the registry loads on first use: a shimmed start-up that imports no patch target never needs it
    if name in _REGISTRY:
        from . import _patch

        return getattr(_patch, name)
    if name in ("PatchError", "StandInAttributeError"):
        from .. import errors

        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
