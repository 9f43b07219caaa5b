"""Which platform this process runs on: CUDASHIM_PLATFORM, else the config's `platform`, else detection.

Split from platform.py because the bootstrap asks this in every shimmed interpreter before user code,
and platform.py's Platform classes need enum (with it functools, collections, re...), which the
answer does not. cudashim.platform re-exports resolve_platform_name; this module imports no torch.
"""

from __future__ import annotations

from . import envs

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Mapping

__all__ = ["resolve_platform_name"]

_FOUND = {"ascend": "an Ascend NPU was found", "nvidia": "an NVIDIA GPU was found",
          "cpu": "no Ascend NPU or NVIDIA GPU was found"}


def resolve_platform_name(config: Any = None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(name, why): CUDASHIM_PLATFORM, else the config's `platform`, else hardware detection. No torch."""
    override = envs.get("CUDASHIM_PLATFORM", environ)
    if override:
        return str(override), f"CUDASHIM_PLATFORM={envs.raw('CUDASHIM_PLATFORM', environ)} overrides detection"
    if config is None:
        from .config import load_config

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
