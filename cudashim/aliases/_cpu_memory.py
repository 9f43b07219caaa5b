"""torch.cuda memory queries answered for the CPU, with the keys engines read.

What the numbers mean on cpu (there is no device heap; the process's memory is the "device"):

* ``mem_get_info()`` -> ``(free, total)``: the host's ``MemAvailable`` and ``MemTotal`` from
  /proc/meminfo, bounded by the cgroup v2 limit (``memory.max`` / ``memory.current``) when a
  container sets a lower one.
* ``memory_allocated()`` / ``memory_reserved()`` / ``memory_stats()["allocated_bytes.all.current"]``:
  this process's resident set (``VmRSS``). Reserved equals allocated: the CPU allocator hands freed
  memory back to the OS, there is no cache that could be reserved on top.
* ``max_memory_allocated()`` / ``...peak`` keys: ``VmHWM``, the resident high-water mark, since start or
  the last ``reset_peak_memory_stats()`` (which clears it through /proc/self/clear_refs; where the
  kernel refuses, peaks are the highest value seen by a query since the reset).
* ``empty_cache()``: nothing to free, a no-op.

So an engine's ``total * utilization - used - peak + current`` KV-cache sizing stays meaningful:
``used`` is the host's used memory, ``peak - current`` the transient memory of its warm-up run.
Every read goes through one seam, rooted at CUDASHIM_SYSROOT (tests point it at a fake tree).
"""

from __future__ import annotations

import collections
import os
from typing import Any

__all__ = [
    "mem_get_info",
    "memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "reset_accumulated_memory_stats",
    "empty_cache",
    "memory_summary",
    "memory_snapshot",
    "set_per_process_memory_fraction",
    "host_total_memory",
]

_peak_floor: int | None = None  # set when clear_refs is refused: peaks are tracked by queries
_seen_peak = 0


def _root() -> str:
    return os.environ.get("CUDASHIM_SYSROOT") or "/"


def _read(path: str) -> str | None:
    try:
        with open(os.path.join(_root(), path.lstrip("/")), encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _kv_kb(text: str | None, keys: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        if name in keys:
            parts = rest.split()
            if parts:
                out[name] = int(parts[0]) * 1024
    return out


def _cgroup_limit() -> tuple[int, int] | None:
    limit, current = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    if not limit or not current or limit.strip() == "max":
        return None
    try:
        return int(limit.strip()), int(current.strip())
    except ValueError:
        return None


def host_total_memory() -> int:
    return mem_get_info()[1]


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of host memory this process may use."""
    info = _kv_kb(_read("/proc/meminfo"), ("MemTotal", "MemAvailable", "MemFree"))
    total = info.get("MemTotal", 0)
    free = info.get("MemAvailable", info.get("MemFree", 0))
    cg = _cgroup_limit()
    if cg is not None and 0 < cg[0] < total:
        total, free = cg[0], max(0, min(free, cg[0] - cg[1]))
    return free, total


def _rss() -> tuple[int, int]:
    global _seen_peak
    st = _kv_kb(_read("/proc/self/status"), ("VmRSS", "VmHWM"))
    cur = st.get("VmRSS", 0)
    peak = max(st.get("VmHWM", cur), cur)
    if _peak_floor is not None:  # the kernel would not reset VmHWM: use what queries saw
        _seen_peak = max(_seen_peak, cur)
        peak = _seen_peak
    return cur, peak


def memory_allocated(device: Any = None) -> int:
    return _rss()[0]


def max_memory_allocated(device: Any = None) -> int:
    return _rss()[1]


memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device: Any = None) -> None:
    global _peak_floor, _seen_peak
    try:
        # "5" resets the resident high-water mark (VmHWM) of this process (Linux >= 4.0)
        with open(os.path.join(_root(), "proc/self/clear_refs"), "w") as f:
            f.write("5")
        _peak_floor = None
    except OSError:
        _peak_floor = _seen_peak = _rss()[0]


reset_max_memory_allocated = reset_peak_memory_stats


def reset_accumulated_memory_stats(device: Any = None) -> None:
    return None


def empty_cache() -> None:
    return None


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    if not 0 <= fraction <= 1:
        raise ValueError(f"torch.cuda.set_per_process_memory_fraction({fraction}): must be within [0, 1]")


def memory_stats(device: Any = None) -> dict[str, Any]:
    cur, peak = _rss()
    stats: dict[str, Any] = collections.OrderedDict()
    for kind in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            c, p = (cur, peak) if pool in ("all", "large_pool") else (0, 0)
            stats[f"{kind}.{pool}.current"] = c
            stats[f"{kind}.{pool}.peak"] = p
            stats[f"{kind}.{pool}.allocated"] = p
            stats[f"{kind}.{pool}.freed"] = p - c
    for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free"):
        stats[key] = 0
    return dict(sorted(stats.items()))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    cur, peak = _rss()
    free, total = mem_get_info()
    return (f"cudashim cpu memory: process resident {cur / 2**20:.1f} MiB (peak {peak / 2**20:.1f} MiB); "
            f"host available {free / 2**30:.2f} of {total / 2**30:.2f} GiB")


def memory_snapshot() -> list[Any]:
    return []


def _reset() -> None:
    global _peak_floor, _seen_peak
    _peak_floor, _seen_peak = None, 0
