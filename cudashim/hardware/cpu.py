"""The host CPU's NUMA layout: which CPUs belong to which NUMA node, one logical CPU per physical core.

Accelerator NUMA placement is decided by intersecting a device's CPU affinity with these sets, so
hyper-threads must not count twice: `lscpu -p=CPU,NODE,SOCKET,CORE,ONLINE` gives the core of every
logical CPU and only the smallest logical CPU of each online core is kept. Where lscpu is absent,
the node cpulists in /sys/devices/system/node stand in (logical CPUs: SMT siblings share a node, so
the largest intersection rarely changes, but lscpu is preferred).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from . import device

__all__ = [
    "parse_cpu_list",
    "format_cpu_list",
    "parse_lscpu",
    "physical_cores_by_numa",
    "numa_cpus",
    "best_numa_node",
    "LSCPU_ARGV",
    "LSCPU_TIMEOUT_S",
]

LSCPU_ARGV = ("lscpu", "-p=CPU,NODE,SOCKET,CORE,ONLINE")
LSCPU_TIMEOUT_S = 5.0

# Linux tops out at a few thousand CPUs; a bigger id is garbage, and refusing it keeps a hostile
# '0-999999999' from allocating a billion-element set
_MAX_CPU = 1 << 16
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
_NODE_DIR = re.compile(r"^node(\d+)$")


def parse_cpu_list(text: str) -> frozenset[int] | None:
    """'0-23,48-71' (the kernel's cpulist format) -> the CPU ids; '' -> empty; garbage -> None."""
    text = text.strip()
    if not text:
        return frozenset()
    cpus: set[int] = set()
    for item in text.split(","):
        m = _RANGE.match(item)
        if m is None:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or hi >= _MAX_CPU:
            return None
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The inverse of parse_cpu_list: ascending ranges, e.g. {0,1,2,5} -> '0-2,5'."""
    out: list[str] = []
    run: list[int] = []
    for cpu in sorted(set(cpus)):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [cpu]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _field_int(value: str, default: int | None) -> int | None:
    value = value.strip()
    if not value:
        return default
    if not value.isascii() or not value.isdigit():
        raise ValueError(value)
    return int(value)


def parse_lscpu(text: str) -> dict[int, frozenset[int]] | None:
    """Output of `lscpu -p=CPU,NODE,SOCKET,CORE,ONLINE` -> {numa node: smallest logical CPU per core}.

    Offline CPUs are dropped. Any malformed data row makes the whole output untrusted (None): a
    half-parsed table would place devices on the wrong node without anyone noticing.
    """
    first_cpu_of_core: dict[tuple[int, int, int], int] = {}
    seen: set[int] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) != 5:
            return None
        try:
            cpu = _field_int(fields[0], None)
            # an empty NODE/SOCKET means the kernel has no such level: one node, one socket
            node = _field_int(fields[1], 0)
            socket = _field_int(fields[2], 0)
            core = _field_int(fields[3], None)
        except ValueError:
            return None
        online = fields[4].strip().upper()
        if cpu is None or cpu >= _MAX_CPU or cpu in seen or online not in ("Y", "N", ""):
            return None
        seen.add(cpu)
        if online == "N":
            continue
        key = (node, socket, cpu if core is None else core)  # type: ignore[arg-type]
        if key not in first_cpu_of_core or cpu < first_cpu_of_core[key]:
            first_cpu_of_core[key] = cpu
    if not first_cpu_of_core:
        return None
    by_node: dict[int, set[int]] = {}
    for (node, _socket, _core), cpu in first_cpu_of_core.items():
        by_node.setdefault(node, set()).add(cpu)
    return {node: frozenset(cpus) for node, cpus in sorted(by_node.items())}


def numa_cpus(root: str | None = None) -> dict[int, frozenset[int]] | None:
    """{node: logical CPUs} from /sys/devices/system/node/node*/cpulist, or None when absent."""
    base = device.join(device.resolve_root(root), "/sys/devices/system/node")
    result: dict[int, frozenset[int]] = {}
    for name in device.list_dir(base):
        m = _NODE_DIR.match(name)
        if m is None:
            continue
        text = device.read_text(f"{base}/{name}/cpulist")
        cpus = None if text is None else parse_cpu_list(text)
        if cpus is not None:
            result[int(m.group(1))] = cpus
    return dict(sorted(result.items())) or None


def physical_cores_by_numa(
    root: str | None = None, timeout: float = LSCPU_TIMEOUT_S
) -> dict[int, frozenset[int]] | None:
    """{node: one logical CPU per physical core} via lscpu; sysfs node cpulists when lscpu is absent."""
    out = device.run_command(LSCPU_ARGV, timeout, root)
    parsed = None if out is None else parse_lscpu(out)
    return parsed if parsed is not None else numa_cpus(root)


def best_numa_node(affinity: Iterable[int], by_node: Mapping[int, Iterable[int]]) -> int | None:
    """The node sharing the most CPUs with `affinity` (lowest id on a tie); None when none shares any."""
    wanted = frozenset(affinity)
    best: int | None = None
    best_count = 0
    for node in sorted(by_node):
        count = len(wanted.intersection(by_node[node]))
        if count > best_count:
            best, best_count = node, count
    return best
