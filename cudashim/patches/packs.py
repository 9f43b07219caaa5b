"""The built-in patch packs, when they apply on each platform, and the names a config may use.

Data and two checks, no registry: the bootstrap reads target_modules() here in every shimmed
start-up, before anything of the registry (_patch) loads.
"""

from ..platform import PLATFORMS

# no typing or `from __future__ import annotations`: on the start-up path (annotations are strings)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

__all__ = ["PACKS", "PLATFORM_MODE", "ALWAYS", "ABSENT_ONLY", "pack_of", "target_modules", "check_config"]

# ---------------------------------------------------------------------------------------------------
# Built-in patch packs: CUDA-only symbols the shim knows how to replace, the patch maps every project
# gets beside its own. A pack is switched off as a whole by naming it in `disable` (config) or
# CUDASHIM_DISABLE_PATCHES; a single target by naming its "module:symbol".

_FA = "cudashim.replacements.flash_attn"

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
        "flash_attn.cute.interface:_flash_attn_fwd": "cudashim.replacements.flash_attn_cute:_flash_attn_fwd",
    },
    "deep_select": {
        "deep_select.interface:topk": "cudashim.replacements.deep_select:topk",
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


def check_config(config: "Config") -> None:
    """Raise ConfigError naming file and key for a patch sub-table that names no platform, or a
    `disable` name that means neither a pack nor a target (config.py reads these as plain data)."""
    for entry in config.patches:
        if entry.platform is not None and entry.platform not in PLATFORMS:
            from ..errors import ConfigError  # imported to raise: a start-up that goes well needs none

            raise ConfigError(f"{config.path}: [tool.cudashim.patches.{entry.platform}] {entry.platform!r} is not "
                              f"a platform sub-table; use one of {', '.join(PLATFORMS)}")
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
    Checks the config first (check_config)."""
    check_config(config)
    disabled = config.disable
    targets = {t for pack, mapping in PACKS.items() if pack not in disabled for t in mapping if t not in disabled}
    targets.update(e.target for e in config.patches_for(platform) if e.target not in disabled)
    modules = {t.split(":")[0] for t in targets}
    if packages:
        modules.update(m.rsplit(".", i)[0] for m in list(modules) for i in range(1, m.count(".") + 1))
    return modules
