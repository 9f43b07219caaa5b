"""NVIDIA GPUs, found without creating a CUDA context.

Presence and bus ids come from the driver's procfs (/proc/driver/nvidia/gpus/<bus id>/), else the
/dev/nvidiaN nodes; NUMA nodes from PCI sysfs. Name and compute capability come from NVML, which
only opens the driver's management interface: a CUDA context (after which CUDA_VISIBLE_DEVICES no
longer takes effect) is never created. `pynvml` is imported inside the one function that needs it.
"""

from __future__ import annotations

from ..envs import _Record as Record
from . import device
from ._fs import nvidia_node_listed as _nvidia_node_listed

# detection imports this module before user code where /dev has no nvidiaN but procfs lists entries:
# no re, dataclasses or typing at import (the parsers below are string code; records are Record;
# hints are strings)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Sequence

    NvmlQuery = Callable[[], "Sequence[NvmlDevice] | None"]

__all__ = [
    "GpuDevice",
    "NvmlDevice",
    "is_available",
    "proc_bus_ids",
    "device_node_indices",
    "parse_information",
    "normalize_bus_id",
    "parse_numa_node",
    "pci_numa_node",
    "query_nvml",
    "discover_gpus",
]

_PROC_GPUS = "/proc/driver/nvidia/gpus"
_HEX = frozenset("0123456789abcdefABCDEF")
_NUMA_PATHS = ("/sys/bus/pci/devices/{bus}/numa_node", "/sys/bus/pci/drivers/nvidia/{bus}/numa_node")


class NvmlDevice(Record):
    """What NVML says about one GPU (index is NVML's, which orders by PCI bus id)."""

    __slots__ = ("index", "name", "compute_capability", "bus_id")
    index: int
    name: str | None
    compute_capability: tuple[int, int] | None
    bus_id: str | None


class GpuDevice(Record):
    """One GPU: index (driver minor number), PCI bus id, NVML name/capability, NUMA node (None = unknown)."""

    __slots__ = ("index", "bus_id", "name", "compute_capability", "numa_node")
    index: int
    bus_id: str | None
    name: str | None
    compute_capability: tuple[int, int] | None
    numa_node: int | None


def normalize_bus_id(text: str) -> str | None:
    """'00000000:18:00.0' (NVML) or '0000:18:00.0' (procfs) -> '0000:18:00.0'; garbage -> None.

    Accepts what `\\s*DOMAIN:BUS:DEV.FN\\s*` with 1-8, 1-2, 1-2 hex digits and FN in 0-7 matches.
    """
    parts = text.strip().split(":")
    if len(parts) != 3:
        return None
    domain, bus, devfn = parts
    dev, dot, fn = devfn.partition(".")
    if not (dot and 1 <= len(domain) <= 8 and 1 <= len(bus) <= 2 and 1 <= len(dev) <= 2
            and len(fn) == 1 and fn in "01234567" and _HEX.issuperset(domain + bus + dev)):
        return None
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def parse_numa_node(text: str) -> int | None:
    """A sysfs numa_node file: '1\\n' -> 1; '-1' (no NUMA information) and garbage -> None."""
    text = text.strip()
    if not text.isascii() or not text.isdigit():
        return None
    return int(text)


def parse_information(text: str) -> dict[str, str]:
    """/proc/driver/nvidia/gpus/<bus>/information ('Key:  value' lines) -> {key: value}."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            info[key.strip()] = value.strip()
    return info


def proc_bus_ids(root: str | None = None) -> tuple[str, ...]:
    """Bus ids of the GPUs the driver lists in procfs, sorted."""
    base = device.join(device.resolve_root(root), _PROC_GPUS)
    ids = (normalize_bus_id(name) for name in device.list_dir(base))
    return tuple(sorted(i for i in ids if i is not None))


def device_node_indices(root: str | None = None) -> tuple[int, ...]:
    """N of every /dev/nvidiaN (nvidiactl, nvidia-uvm… are not GPUs), sorted."""
    names = device.list_dir(device.join(device.resolve_root(root), "/dev"))
    return tuple(sorted(n for n in (device.numbered(name, "nvidia") for name in names) if n is not None))


def is_available(root: str | None = None, dev_names: Sequence[str] | None = None) -> bool:
    """Any GPU in procfs or /dev (dev_names: the /dev listing when the caller already has it).

    The /dev rule is the package's (cudashim.hardware._nvidia_node_listed): detection applies it
    without importing this module.
    """
    root = device.resolve_root(root)
    if proc_bus_ids(root):
        return True
    if dev_names is None:
        dev_names = device.list_dir(device.join(root, "/dev"))
    return _nvidia_node_listed(dev_names)


def pci_numa_node(bus_id: str, root: str | None = None) -> int | None:
    root = device.resolve_root(root)
    for pattern in _NUMA_PATHS:
        text = device.read_text(device.join(root, pattern.format(bus=bus_id)))
        if text is not None:
            node = parse_numa_node(text)
            if node is not None:
                return node
    return None


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def query_nvml() -> tuple[NvmlDevice, ...] | None:
    """Every GPU as NVML sees it, or None when NVML (library, driver or pynvml) is unavailable.

    nvmlInit/nvmlShutdown are paired in try/finally so a failure halfway leaves nothing open.
    """
    try:
        import pynvml
    except Exception:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        devices = []
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            try:
                name: str | None = _text(pynvml.nvmlDeviceGetName(handle))
            except Exception:
                name = None
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                cc: tuple[int, int] | None = (int(major), int(minor))
            except Exception:
                cc = None
            try:
                bus = normalize_bus_id(_text(pynvml.nvmlDeviceGetPciInfo(handle).busId))
            except Exception:
                bus = None
            devices.append(NvmlDevice(index, name, cc, bus))
        return tuple(devices)
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def discover_gpus(root: str | None = None, nvml: NvmlQuery | None = None) -> list[GpuDevice]:
    """Every GPU of the tree, ordered by driver minor number.

    `nvml` supplies names and capabilities; by default it is query_nvml on the real root and nothing
    under a fake one (a fake tree must not pick up the host's GPUs). Without NVML the name falls
    back to the 'Model:' line of procfs and the capability is None.
    """
    root = device.resolve_root(root)
    if nvml is None and device.is_real_root(root):
        nvml = query_nvml
    from_nvml = tuple(nvml() or ()) if nvml is not None else ()
    by_bus = {normalize_bus_id(d.bus_id): d for d in from_nvml if d.bus_id}
    by_index = {d.index: d for d in from_nvml}

    found: list[tuple[int, str | None, str | None]] = []  # (minor, bus id, procfs model)
    base = device.join(root, _PROC_GPUS)
    for position, bus in enumerate(proc_bus_ids(root)):
        text = device.read_text(f"{base}/{bus}/information") or ""
        info = parse_information(text)
        minor = info.get("Device Minor", "")
        found.append((int(minor) if minor.isdigit() else position, bus, info.get("Model") or None))
    if not found:
        found = [(n, None, None) for n in device_node_indices(root)]

    gpus = []
    for minor, bus, model in sorted(found, key=lambda f: f[0]):
        # without procfs the minor number is the best key NVML offers (they agree on usual setups)
        nv = by_bus.get(bus) if bus else by_index.get(minor)
        if bus is None and nv is not None and nv.bus_id:
            bus = normalize_bus_id(nv.bus_id)
        gpus.append(
            GpuDevice(
                index=minor,
                bus_id=bus,
                name=(nv.name if nv and nv.name else model),
                compute_capability=nv.compute_capability if nv else None,
                numa_node=pci_numa_node(bus, root) if bus else None,
            )
        )
    return gpus
