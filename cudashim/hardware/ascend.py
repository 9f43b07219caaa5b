"""Ascend NPUs, found from the file system and the driver's tools, without initialising the ACL runtime.

Presence: /dev/davinci_manager, /dev/davinciN nodes, or /sys/class/ubcore/udma* entries whose
device/ub_totalues is > 0 (Ascend 950 / UB systems expose their devices there).

NUMA placement, best source first:
1. `npu-smi info -t topo -i 0` gives each NPU's CPU affinity; intersected with the physical cores of
   each NUMA node (lscpu, one logical CPU per core) the largest intersection wins.
2. Where the tool is absent but sysfs knows the entry's raw NUMA node, the node is
   ``(raw // 2) * 2 + index % 2``: devices alternate between the two nodes of their socket pair.
3. Otherwise it is unknown (None); npu_numa_node() raises naming the device.
"""

from __future__ import annotations

from . import device
from ._fs import ascend_node_listed as _ascend_node_listed

# is_available() runs before user code where detection sees udma entries under ubcore and no davinci
# node: this module imports no re, typing or cpu.py at import. NpuDevice (a typing.NamedTuple) is
# built on first use, and cpu.py (lscpu parsing) is imported by the functions that place devices on
# NUMA nodes.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Mapping, NamedTuple, Sequence

    class NpuDevice(NamedTuple):
        entry: str
        physical_id: int
        numa_node: int | None

__all__ = [
    "NpuDevice",
    "NPU_SMI_TOPO_ARGV",
    "NPU_SMI_TIMEOUT_S",
    "is_available",
    "ubcore_entries",
    "davinci_indices",
    "parse_npu_smi_topo",
    "npu_smi_affinity",
    "discover_npu_devices",
    "npu_numa_node",
]

NPU_SMI_TOPO_ARGV = ("npu-smi", "info", "-t", "topo", "-i", "0")
# npu-smi talks to every chip's firmware; a second or two is normal, ten means it is stuck
NPU_SMI_TIMEOUT_S = 10.0

_UBCORE = "/sys/class/ubcore"


def _npu_device() -> type:
    """The NpuDevice class, defined on first use (a NamedTuple: typing is not imported before)."""
    cls = globals().get("NpuDevice")
    if cls is not None:
        return cls
    from typing import NamedTuple

    class NpuDevice(NamedTuple):
        """entry: the ubcore entry or /dev node name; physical_id: the NPU id npu-smi and CANN use;
        numa_node: resolved as the module docstring says, None when unknown."""

        entry: str
        physical_id: int
        numa_node: int | None

    # found by pickle and repr under its public name, as if defined at module level
    NpuDevice.__module__, NpuDevice.__qualname__ = __name__, "NpuDevice"
    globals()["NpuDevice"] = NpuDevice
    return NpuDevice


def __getattr__(name: str) -> object:
    if name == "NpuDevice":
        return _npu_device()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def ubcore_entries(root: str | None = None) -> list[tuple[str, int, int | None]]:
    """(entry, physical id, raw sysfs NUMA node or None) for every live udma entry, by physical id.

    Entries named udmaN carry their id; other udma* spellings are numbered by their sorted position
    after the numbered ones. An entry with no units (ub_totalues 0, absent or garbage) is not a device.
    """
    base = device.join(device.resolve_root(root), _UBCORE)
    numbered: list[tuple[str, int, int | None]] = []
    others: list[tuple[str, int | None]] = []
    for name in device.list_dir(base):
        if not name.startswith("udma"):
            continue
        units = device.read_int(f"{base}/{name}/device/ub_totalues")
        if units is None or units <= 0:
            continue
        raw = device.read_int(f"{base}/{name}/device/numa_node")
        raw = raw if raw is not None and raw >= 0 else None
        n = device.numbered(name, "udma")
        if n is not None:
            numbered.append((name, n, raw))
        else:
            others.append((name, raw))
    numbered.sort(key=lambda e: e[1])
    next_id = (numbered[-1][1] + 1) if numbered else 0
    numbered += [(name, next_id + i, raw) for i, (name, raw) in enumerate(others)]
    return numbered


def davinci_indices(root: str | None = None) -> tuple[int, ...]:
    """N of every /dev/davinciN (davinci_manager is the control node, not a device), sorted."""
    names = device.list_dir(device.join(device.resolve_root(root), "/dev"))
    return tuple(sorted(n for n in (device.numbered(name, "davinci") for name in names) if n is not None))


def is_available(root: str | None = None, dev_names: Sequence[str] | None = None) -> bool:
    """Any sign of an NPU. Stops at the first one: this is on every program's start-up path.

    dev_names: the listing of <root>/dev when the caller already has it (detection lists it once).
    """
    root = device.resolve_root(root)
    if dev_names is None:
        dev_names = device.list_dir(device.join(root, "/dev"))
    if _ascend_node_listed(dev_names):  # the package's rule: detection applies it without this module
        return True
    base = device.join(root, _UBCORE)
    for name in device.list_dir(base):
        if name.startswith("udma"):
            units = device.read_int(f"{base}/{name}/device/ub_totalues")
            if units is not None and units > 0:
                return True
    return False


def parse_npu_smi_topo(text: str) -> dict[int, frozenset[int]] | None:
    """`npu-smi info -t topo` output -> {NPU id: CPU affinity}; None when there is no usable table.

    The table is a header 'NPU0 … NPUn CPU Affinity' and one row per NPU: its name, one link token
    (X, HCCS, PIX, SYS, UB…) per column, then the affinity cpulist. A row whose affinity is missing
    or not a cpulist is skipped; the legend after the table is ignored.
    """
    from . import cpu

    lines = text.splitlines()
    columns = None
    for i, line in enumerate(lines):
        if "CPU Affinity" in line:
            # newer tools append columns after the affinity (e.g. NUMA Affinity); only the NPU
            # columns before it fix where the affinity sits in a row
            head = line.split("CPU Affinity", 1)[0].split()
            if head and all(device.numbered(h, "NPU") is not None for h in head):
                columns, start = len(head), i + 1
                break
    if columns is None:
        return None
    result: dict[int, frozenset[int]] = {}
    for line in lines[start:]:
        tokens = line.split()
        if not tokens:
            continue
        npu = device.numbered(tokens[0], "NPU")
        if npu is None:
            # rows are contiguous; the first non-row line ends the table (a legend follows)
            if result:
                break
            continue
        if len(tokens) < columns + 2:
            continue
        cpus = cpu.parse_cpu_list(tokens[columns + 1])
        if cpus:
            result[npu] = cpus
    return result or None


def npu_smi_affinity(
    root: str | None = None, timeout: float = NPU_SMI_TIMEOUT_S
) -> dict[int, frozenset[int]] | None:
    out = device.run_command(NPU_SMI_TOPO_ARGV, timeout, root)
    return None if out is None else parse_npu_smi_topo(out)


def _resolve_numa(
    index: int,
    physical_id: int,
    raw: int | None,
    affinity: Mapping[int, frozenset[int]] | None,
    cores: Mapping[int, frozenset[int]] | None,
) -> int | None:
    if affinity and cores and physical_id in affinity:
        from . import cpu

        node = cpu.best_numa_node(affinity[physical_id], cores)
        if node is not None:
            return node
    if raw is not None:
        return (raw // 2) * 2 + index % 2
    return None


def discover_npu_devices(
    root: str | None = None,
    npu_smi_timeout: float = NPU_SMI_TIMEOUT_S,
    lscpu_timeout: float | None = None,
) -> list[NpuDevice]:
    """Every NPU of the tree: ubcore entries when there are any, else /dev/davinciN, by physical id.

    Runs npu-smi and lscpu (each under its timeout; lscpu's default is cpu.LSCPU_TIMEOUT_S) only when
    there is at least one device.
    """
    root = device.resolve_root(root)
    found = ubcore_entries(root)
    if not found:
        found = [(f"davinci{n}", n, None) for n in davinci_indices(root)]
    if not found:
        return []
    from . import cpu

    affinity = npu_smi_affinity(root, npu_smi_timeout)
    if lscpu_timeout is None:
        lscpu_timeout = cpu.LSCPU_TIMEOUT_S
    cores = cpu.physical_cores_by_numa(root, lscpu_timeout) if affinity else None
    npu_device = _npu_device()
    return [
        npu_device(entry, phys, _resolve_numa(i, phys, raw, affinity, cores))
        for i, (entry, phys, raw) in enumerate(found)
    ]


def npu_numa_node(index: int, root: str | None = None, devices: list[NpuDevice] | None = None) -> int:
    """NUMA node of the index-th NPU; HardwareError naming the device when it cannot be known."""
    from ..errors import HardwareError  # imported here: detection imports this module, never raises

    devices = discover_npu_devices(root) if devices is None else devices
    if not 0 <= index < len(devices):
        raise HardwareError(
            f"Ascend device index {index} does not exist on ascend: {len(devices)} NPU(s) found; "
            f"use an index below {len(devices)} or check /dev/davinci* and /sys/class/ubcore"
        )
    dev = devices[index]
    if dev.numa_node is None:
        raise HardwareError(
            f"NUMA node of Ascend device {index} ({dev.entry}, physical id {dev.physical_id}) is unknown "
            f"on ascend: `npu-smi info -t topo -i 0` gave no CPU affinity for it and sysfs has no numa_node; "
            f"install the driver tools (npu-smi, lscpu) or bind CPUs yourself"
        )
    return dev.numa_node
