"""The simulated Ascend host (issue 19 item 5): CUDASHIM_SIMULATE=1 with platform ascend makes hardware discovery
read the packaged tree, so detection, NUMA placement, visibility and doctor take their ascend paths — and doctor
says `simulated`. Expected values are the 910B node's facts as tests/fixtures/hwtrees.py describes them."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

from cudashim import visibility
from cudashim.hardware import (
    SIMULATED_ASCEND_ROOT,
    accelerator_kind,
    device_count,
    discover_npu_devices,
    resolve_root,
)

from hwtest import fresh_hardware_state, hwtrees  # noqa: F401  (autouse fixture: a clean state per test)

REPO = Path(__file__).resolve().parents[2]


def _simulate(monkeypatch, platform: str = "ascend") -> None:
    monkeypatch.setenv("CUDASHIM_SIMULATE", "1")
    monkeypatch.setenv("CUDASHIM_PLATFORM", platform)


def test_packaged_tree_is_the_generated_910b_node(tmp_path):
    built = hwtrees.build("ascend910b", tmp_path / "ascend910b")
    packaged = Path(SIMULATED_ASCEND_ROOT)
    files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    assert sorted(p.relative_to(packaged) for p in packaged.rglob("*") if p.is_file()) == files
    for rel in files:
        assert filecmp.cmp(built / rel, packaged / rel, shallow=False), f"{rel} is stale: rebuild with hwtrees.build"
        assert os.access(packaged / rel, os.X_OK) == os.access(built / rel, os.X_OK), f"{rel} mode"


def test_simulate_on_ascend_reads_the_simulated_host(monkeypatch):
    _simulate(monkeypatch)
    assert resolve_root() == SIMULATED_ASCEND_ROOT
    assert accelerator_kind() == "ascend" and device_count() == 8
    devs = discover_npu_devices()
    assert [d.entry for d in devs] == [f"davinci{i}" for i in range(8)]
    # npu-smi's CPU affinity 144-167, 96-119, 0-23, 48-71 (pairs) against 4 nodes of 48 cores
    assert [d.numa_node for d in devs] == [3, 3, 2, 2, 0, 0, 1, 1]


def test_simulate_means_nothing_off_ascend_and_an_explicit_sysroot_wins(monkeypatch, tmp_path):
    _simulate(monkeypatch, "cpu")
    assert resolve_root() == os.path.abspath("/")
    _simulate(monkeypatch)
    monkeypatch.setenv("CUDASHIM_SYSROOT", str(tmp_path))
    assert resolve_root() == str(tmp_path)


def test_rank_slices_come_from_the_simulated_devices(monkeypatch):
    _simulate(monkeypatch)
    env = {"CUDASHIM_SIMULATE": "1", "CUDASHIM_PLATFORM": "ascend", "LOCAL_RANK": "3", "CUDASHIM_DEVICES_PER_RANK": "2"}
    visibility.reconcile("ascend", env)
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "6,7" and env["CUDA_VISIBLE_DEVICES"] == "6,7"


def _doctor(rc: int = 0, **extra: str) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("CUDASHIM_") and k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")}
    environ.update(extra)
    out = subprocess.run([sys.executable, "-m", "cudashim", "doctor", "--json"], capture_output=True, text=True,
                         env=environ, cwd=REPO, timeout=120)
    assert out.returncode == rc, out.stderr  # doctor exits 1 when it lists problems
    return json.loads(out.stdout)


def test_doctor_says_simulated_and_shows_the_simulated_host():
    rep = _doctor(CUDASHIM_SIMULATE="1", CUDASHIM_PLATFORM="ascend")
    assert rep["platform"]["name"] == "ascend" and rep["platform"]["simulated"] is True
    hw = rep["hardware"]
    assert hw["simulated"] is True and hw["detected"] == "ascend" and len(hw["devices"]) == 8
    assert [d["numa_node"] for d in hw["devices"]] == [3, 3, 2, 2, 0, 0, 1, 1]
    assert rep["problems"] == []


def test_doctor_flags_simulate_without_ascend():
    rep = _doctor(1, CUDASHIM_SIMULATE="1", CUDASHIM_PLATFORM="cpu")
    assert rep["platform"]["simulated"] is False and rep["hardware"]["simulated"] is False
    assert any("CUDASHIM_SIMULATE" in p for p in rep["problems"])
