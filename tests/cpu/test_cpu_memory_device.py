"""Memory queries and device properties on cpu read the host through one seam (CUDASHIM_SYSROOT)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cudashim.aliases import _cpu_device, _cpu_memory
from cudashim.aliases._common import DeviceRewriter
from cudashim.errors import CapabilityError

GiB, MiB = 2**30, 2**20


def _tree(root: Path, *, total_kb: int, avail_kb: int, rss_kb: int, hwm_kb: int, cg_max: str | None = None,
          cg_cur: int = 0) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/meminfo").write_text(f"MemTotal:       {total_kb} kB\nMemFree:        1 kB\nMemAvailable:   {avail_kb} kB\n")
    (root / "proc/self/status").write_text(f"Name:\tpython\nVmHWM:\t{hwm_kb} kB\nVmRSS:\t{rss_kb} kB\n")
    (root / "proc/self/clear_refs").write_text("")
    (root / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n")
    if cg_max is not None:
        (root / "sys/fs/cgroup").mkdir(parents=True)
        (root / "sys/fs/cgroup/memory.max").write_text(cg_max + "\n")
        (root / "sys/fs/cgroup/memory.current").write_text(f"{cg_cur}\n")


@pytest.fixture
def host(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDASHIM_SYSROOT", str(tmp_path))
    _cpu_memory._reset()
    yield tmp_path
    _cpu_memory._reset()


def test_mem_get_info_is_host_available_and_total(host) -> None:
    _tree(host, total_kb=16 * 2**20, avail_kb=10 * 2**20, rss_kb=512 * 1024, hwm_kb=768 * 1024)
    assert _cpu_memory.mem_get_info() == (10 * GiB, 16 * GiB)


def test_cgroup_limit_bounds_mem_get_info(host) -> None:
    _tree(host, total_kb=16 * 2**20, avail_kb=10 * 2**20, rss_kb=1, hwm_kb=1, cg_max=str(4 * GiB), cg_cur=GiB)
    assert _cpu_memory.mem_get_info() == (3 * GiB, 4 * GiB)


def test_unlimited_cgroup_is_ignored(host) -> None:
    _tree(host, total_kb=16 * 2**20, avail_kb=10 * 2**20, rss_kb=1, hwm_kb=1, cg_max="max")
    assert _cpu_memory.mem_get_info() == (10 * GiB, 16 * GiB)


def test_memory_stats_keys_engines_read(host) -> None:
    _tree(host, total_kb=16 * 2**20, avail_kb=10 * 2**20, rss_kb=512 * 1024, hwm_kb=768 * 1024)
    stats = _cpu_memory.memory_stats()
    assert stats["allocated_bytes.all.current"] == 512 * MiB == _cpu_memory.memory_allocated()
    assert stats["allocated_bytes.all.peak"] == 768 * MiB == _cpu_memory.max_memory_allocated()
    assert stats["reserved_bytes.all.current"] == _cpu_memory.memory_reserved() == 512 * MiB
    assert stats["active_bytes.all.peak"] == 768 * MiB and stats["num_ooms"] == 0


def test_reset_peak_clears_the_high_water_mark(host) -> None:
    _tree(host, total_kb=1, avail_kb=1, rss_kb=100, hwm_kb=200)
    _cpu_memory.reset_peak_memory_stats()
    assert (host / "proc/self/clear_refs").read_text() == "5"  # the kernel's "reset VmHWM"


def test_reset_peak_without_kernel_support_tracks_queries(host) -> None:
    _tree(host, total_kb=1, avail_kb=1, rss_kb=100, hwm_kb=200)
    (host / "proc/self/clear_refs").unlink()
    (host / "proc/self/clear_refs").mkdir()  # writing fails like a refused write
    _cpu_memory.reset_peak_memory_stats()
    assert _cpu_memory.max_memory_allocated() == 100 * 1024  # peak restarts at the current RSS


def test_device_count_from_env(monkeypatch) -> None:
    monkeypatch.delenv("CUDASHIM_CPU_DEVICES", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert _cpu_device.cpu_device_count() == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert _cpu_device.cpu_device_count() == 4
    monkeypatch.setenv("CUDASHIM_CPU_DEVICES", "2")
    assert _cpu_device.cpu_device_count() == 2


def test_set_device_is_range_checked_and_says_how_to_fix(monkeypatch) -> None:
    monkeypatch.setenv("CUDASHIM_CPU_DEVICES", "2")
    dm = _cpu_device.DeviceModule(torch, DeviceRewriter(torch, "cpu"))
    dm.set_device("cuda:1")
    assert dm.current_device() == 1
    dm.set_device(torch.device("cuda", 0))
    assert dm.current_device() == 0
    with pytest.raises(CapabilityError) as err:
        dm.set_device(2)
    assert "CUDASHIM_CPU_DEVICES=3" in str(err.value) and "cpu" in str(err.value)


def test_device_properties_documented_answer(host, monkeypatch) -> None:
    import os

    _tree(host, total_kb=8 * 2**20, avail_kb=1, rss_kb=1, hwm_kb=1)
    dm = _cpu_device.DeviceModule(torch, DeviceRewriter(torch, "cpu"))
    p = dm.get_device_properties(0)
    assert p.name == "CPU (Test CPU 9000)" and p.total_memory == 8 * GiB
    assert (p.major, p.minor) == (8, 0) == dm.get_device_capability()
    assert p.multi_processor_count == os.cpu_count()
