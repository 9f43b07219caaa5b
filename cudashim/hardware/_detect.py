"""Which accelerator this machine has, answered from the file system alone and cached per root."""

from __future__ import annotations

from .. import _on_reset  # cudashim._state.on_reset, one import fewer at start-up
from . import device

# on the start-up path of every shimmed process: typing only for the checker (Kind is built on access)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Literal

    Kind = Literal["ascend", "nvidia", "cpu"]

__all__ = ["Kind", "KINDS", "accelerator_kind", "device_count"]

KINDS: tuple[str, ...] = ("ascend", "nvidia", "cpu")

# resolved root -> kind; devices are not hot-plugged under a running program, so one answer per
# process is right, and the bootstrap asks more than once
_kind_cache: dict[str, Kind] = {}


def __getattr__(name: str) -> object:
    if name == "Kind":
        from typing import Literal

        kind = globals()["Kind"] = Literal["ascend", "nvidia", "cpu"]
        return kind
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@_on_reset
def _clear() -> None:
    _kind_cache.clear()


# Necessary conditions for ascend.is_available / nvidia.is_available, checked before importing
# those modules: detection runs before user code in every shimmed process, and on a machine without
# a vendor's devices (every machine lacks at least one vendor) its module is then never imported.
# The verdict stays with the vendor module; these only rule out what it would rule out too.
def _may_be_ascend(root: str, dev_names: tuple[str, ...]) -> bool:
    # ascend.is_available: /dev/davinci_manager or davinciN, or a live /sys/class/ubcore/udma* entry
    return (any(n.startswith("davinci") for n in dev_names)
            or any(n.startswith("udma") for n in device.list_dir(device.join(root, "/sys/class/ubcore"))))


def _may_be_nvidia(root: str, dev_names: tuple[str, ...]) -> bool:
    # nvidia.is_available: a bus id under /proc/driver/nvidia/gpus, or /dev/nvidiaN
    return (any(n.startswith("nvidia") for n in dev_names)
            or bool(device.list_dir(device.join(root, "/proc/driver/nvidia/gpus"))))


def accelerator_kind(root: str | None = None) -> Kind:
    """'ascend' | 'nvidia' | 'cpu'. Ascend is checked first: a box with both drivers is an Ascend box
    (the NVIDIA driver there is incidental, and the Ascend probe is the cheaper miss elsewhere)."""
    key = device.resolve_root(root)
    kind = _kind_cache.get(key)
    if kind is None:
        dev_names = device.list_dir(device.join(key, "/dev"))  # both probes need it: list it once
        kind = "cpu"
        if _may_be_ascend(key, dev_names):
            from . import ascend

            if ascend.is_available(key, dev_names):
                kind = "ascend"
        if kind == "cpu" and _may_be_nvidia(key, dev_names):
            from . import nvidia

            if nvidia.is_available(key, dev_names):
                kind = "nvidia"
        _kind_cache[key] = kind
    return kind


def device_count(kind: str | None = None, root: str | None = None) -> int:
    """How many devices of `kind` (default: the detected one) the tree shows; 0 for cpu.

    Counts come from the file system only (no npu-smi, no NVML), so this is as cheap as detection.
    """
    kind = accelerator_kind(root) if kind is None else kind
    if kind == "ascend":
        from . import ascend

        entries = ascend.ubcore_entries(root)
        return len(entries) if entries else len(ascend.davinci_indices(root))
    if kind == "nvidia":
        from . import nvidia

        return len(nvidia.proc_bus_ids(root)) or len(nvidia.device_node_indices(root))
    if kind == "cpu":
        return 0
    from ._errors import HardwareError  # imported to raise: detection's path never needs it

    raise HardwareError(f"unknown accelerator kind {kind!r}; use one of {', '.join(KINDS)}")
