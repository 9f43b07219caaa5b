"""What happens to torch.cuda once torch is imported: one entry point per platform.

install() is called by the import hook right after `import torch` finishes (torch is in sys.modules);
on nvidia nothing is aliased. cpu.py and npu.py each expose install()/uninstall(), both idempotent.
"""

from __future__ import annotations

import importlib

__all__ = ["install", "uninstall", "installed"]

_MODULES = {"cpu": "cudashim.aliases.cpu", "ascend": "cudashim.aliases.npu"}
_installed: str | None = None


def install(platform: str) -> None:
    global _installed
    if _installed == platform or platform not in _MODULES:
        return
    if _installed is not None:
        uninstall()
    importlib.import_module(_MODULES[platform]).install()
    _installed = platform


def uninstall() -> None:
    global _installed
    if _installed is not None:
        importlib.import_module(_MODULES[_installed]).uninstall()
        _installed = None


def installed() -> str | None:
    """The platform whose alias layer is in place, or None."""
    return _installed


def _reset() -> None:
    uninstall()


from .._state import on_reset  # noqa: E402

on_reset(_reset)
