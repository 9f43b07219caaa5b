"""The cpu platform: torch.cuda becomes the emulated CUDA device (cudashim.emulated), right after
`import torch` (the import hook calls install() through cudashim.installers).

Nothing is renamed: `cuda:N` tensors live in host memory, run PyTorch's CPU kernels, and behave as
CUDA's do (docs/design.md §5); NCCL groups are Gloo groups that answer as NCCL's
(emulated/nccl.py). What stays here is what the device itself cannot say:

* library probes that must see the truth (TileLang's target detection) see torch's real
  is_available() (probes.py);
* loud limits for what is not emulated (_cpu_limits.py): CUDA C++ extensions, symmetric memory;
* Triton kernels launch on the device through the Triton route (cudashim.triton_route).

If the device's native core cannot be built or loaded, install() raises EmulatedBuildError naming
the fix, and under `cudashim run` the program stops before its first line.
"""

from __future__ import annotations

from typing import Any

from .. import _state, emulated, triton_route
from . import _cpu_limits, probes
from ._common import Bindings, when_imported

__all__ = ["install", "uninstall", "installed"]

_bindings = Bindings()
_device: Any = None  # the emulated device's module while installed


def installed() -> bool:
    return _device is not None


def install() -> None:
    """Make torch.cuda the emulated device (idempotent)."""
    global _device
    if _device is not None:
        return
    import torch

    real_is_available = torch.cuda.is_available  # library probes see the truth (docs/design.md §5)
    try:
        _device = emulated.install(_bindings, when_imported=when_imported)
        probes.install("cpu", real_is_available)
        _cpu_limits.bind_lazy(_bindings, installed)
        triton_route.install("cpu")
    except BaseException:
        uninstall()
        raise


def uninstall() -> None:
    """Put back every original (idempotent)."""
    global _device
    triton_route.uninstall()
    if _device is not None:
        probes.uninstall()
        emulated.uninstall()
    _device = None
    _bindings.restore()


_state.on_reset(uninstall)
