"""What the host answers for the emulated cuda device (cudashim/emulated/properties.py), read through one
seam (CUDASHIM_SYSROOT): mem_get_info() is the host's memory, bounded by a cgroup limit; properties
are the documented CPU answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudashim.emulated import properties as host

GiB = 2**30


def _tree(root: Path, *, total_kb: int, avail_kb: int, cg_max: str | None = None, cg_cur: int = 0) -> None:
    (root / "proc").mkdir(parents=True)
    (root / "proc/meminfo").write_text(f"MemTotal:       {total_kb} kB\nMemFree:        1 kB\nMemAvailable:   {avail_kb} kB\n")
    (root / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n")
    if cg_max is not None:
        (root / "sys/fs/cgroup").mkdir(parents=True)
        (root / "sys/fs/cgroup/memory.max").write_text(cg_max + "\n")
        (root / "sys/fs/cgroup/memory.current").write_text(f"{cg_cur}\n")


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDASHIM_SYSROOT", str(tmp_path))
    return tmp_path


def test_mem_get_info_is_host_available_and_total(root) -> None:
    _tree(root, total_kb=16 * 2**20, avail_kb=10 * 2**20)
    assert host.mem_get_info() == (10 * GiB, 16 * GiB)


def test_cgroup_limit_bounds_mem_get_info(root) -> None:
    _tree(root, total_kb=16 * 2**20, avail_kb=10 * 2**20, cg_max=str(4 * GiB), cg_cur=GiB)
    assert host.mem_get_info() == (3 * GiB, 4 * GiB)


def test_unlimited_cgroup_is_ignored(root) -> None:
    _tree(root, total_kb=16 * 2**20, avail_kb=10 * 2**20, cg_max="max")
    assert host.mem_get_info() == (10 * GiB, 16 * GiB)


def test_device_properties_documented_answer(root) -> None:
    _tree(root, total_kb=8 * 2**20, avail_kb=1)
    p = host.host_properties()
    assert p.name == "CPU (Test CPU 9000)" and p.total_memory == 8 * GiB
    assert (p.major, p.minor) == (8, 0) and p.warp_size == 32
    assert p.multi_processor_count == os.cpu_count()
