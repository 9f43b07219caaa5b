"""What happens to torch.cuda once torch is imported: one entry point per platform.

install() is called by the import hook right after `import torch` finishes (torch is in sys.modules);
on nvidia nothing is aliased. cpu.py and ascend.py each expose install()/uninstall(), both idempotent.
"""

from __future__ import annotations

import importlib
import sys

from .. import _torch_compat

__all__ = ["install", "prepare", "uninstall", "installed"]

_MODULES = {"cpu": "cudashim.installers.cpu", "ascend": "cudashim.installers.ascend"}
_installed: str | None = None
_listed: list[tuple[object, str, object]] = []  # torch.accelerator functions counted for the report


def _list_accelerator() -> None:
    """With the report on, count the program's torch.accelerator calls too (the device-generic API
    CUDA code increasingly uses): listed as they are, whatever the platform makes of them."""
    import sys

    report = sys.modules.get("cudashim.report")
    accel = getattr(sys.modules.get("torch"), "accelerator", None)
    if report is None or accel is None or not report.enabled() or _listed:
        return
    for name in getattr(accel, "__all__", ()):
        fn = getattr(accel, name, None)
        if callable(fn) and not isinstance(fn, type):
            _listed.append((accel, name, fn))
            setattr(accel, name, report.wrap(f"torch.accelerator.{name}", "native", fn))


def _unlist_accelerator() -> None:
    while _listed:
        owner, name, fn = _listed.pop()
        setattr(owner, name, fn)


def install(platform: str) -> None:
    global _installed
    if _installed == platform or platform not in _MODULES:
        _list_accelerator()
        return
    if _installed is not None:
        uninstall()
    # before anything registers with torch: an untested torch gets the supported range, not an abort
    _torch_compat.check_supported(sys.modules["torch"])
    importlib.import_module(_MODULES[platform]).install()
    _installed = platform
    _list_accelerator()


def prepare(platform: str) -> None:
    """What must be in place before the platform's device package is first looked up, which may come
    before torch's import: on the simulated Ascend NPU, the simulated torch_npu's folder on sys.path."""
    if platform != "ascend":
        return
    from .. import hardware

    if hardware.simulated_root() is not None:
        from ..emulated.npu import site

        site.prepare()


def uninstall() -> None:
    global _installed
    _unlist_accelerator()
    if _installed is not None:
        importlib.import_module(_MODULES[_installed]).uninstall()
        _installed = None


def installed() -> str | None:
    """The platform whose installer is in place, or None."""
    return _installed


def _reset() -> None:
    uninstall()


from .._state import on_reset  # noqa: E402

on_reset(_reset)
