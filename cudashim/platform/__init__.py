"""Which platform this process runs on, and the one list of platform names.

    PLATFORMS                 the platform names, in detection order
    resolve_platform_name()   (name, why): CUDASHIM_PLATFORM, else the config's `platform`, else detection

The contract classes (Platform, get_platform, platform_name) are in cudashim.platform.contract and
the capability table in cudashim.platform.capabilities: they need enum and more, while the bootstrap
asks only the name, in every shimmed interpreter before user code. This module imports neither
them nor cudashim.config: the caller passes the Config (plain data; its `platform` is checked here). No torch.
"""

from .. import envs

# typing and `from __future__ import annotations` stay out: this module is on the start-up path
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Mapping

__all__ = ["PLATFORMS", "resolve_platform_name", "settle", "settled"]

from .._platforms import PLATFORMS

# the platform the activation (bootstrap or activate()) settled for this process; None when inactive
_settled: "str | None" = None


def settle(name: "str | None") -> None:
    """Record the platform the activation settled (None: deactivated); get_platform() answers it
    rather than resolving again from the working directory's config."""
    global _settled
    _settled = name


def settled() -> "str | None":
    return _settled


_FOUND = {"ascend": "an Ascend NPU was found", "nvidia": "an NVIDIA GPU was found",
          "cpu": "no Ascend NPU or NVIDIA GPU was found"}


def resolve_platform_name(config: "Any" = None, environ: "Mapping[str, str] | None" = None) -> "tuple[str, str]":
    """(name, why): CUDASHIM_PLATFORM, else the config's `platform`, else hardware detection. No torch.

    `config` is the loaded cudashim.config.Config (None: no config file).
    """
    override = envs.get("CUDASHIM_PLATFORM", environ)
    if override:
        return str(override), f"CUDASHIM_PLATFORM={envs.raw('CUDASHIM_PLATFORM', environ)} overrides detection"
    if config is not None and config.platform:
        if config.platform not in PLATFORMS:
            from ..errors import ConfigError

            raise ConfigError(f"{config.path}: [tool.cudashim.platform] {config.platform!r} is not a platform; "
                              f"use one of {', '.join(PLATFORMS)}")
        return config.platform, f"platform = {config.platform!r} in {config.path}"
    from ..hardware import accelerator_kind

    # an explicit environ is the whole environment: its CUDASHIM_SYSROOT (or '/'), not the process's
    root = (envs.get("CUDASHIM_SYSROOT", environ) or "/") if environ is not None else None
    kind = accelerator_kind(root)
    where = root or envs.get("CUDASHIM_SYSROOT") or "/"
    what = _FOUND.get(kind, f"detection said {kind!r}")
    return kind, f"{what} (hardware detection under {where}; checked in order {', '.join(PLATFORMS)})"
