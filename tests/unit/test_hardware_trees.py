"""Detection on every fixture tree: kind, device count and NUMA nodes (expected values are the
machines' facts, written by hand from the tree descriptions in tests/fixtures/hwtrees.py)."""

from __future__ import annotations

import filecmp
import os

import pytest

from cudashim import _state
from cudashim.errors import VisibilityError
from cudashim.hardware import (
    HardwareError,
    NvmlDevice,
    accelerator_kind,
    device_count,
    discover_gpus,
    discover_npu_devices,
    npu_numa_node,
    numa_cpus,
)
from cudashim.hardware import nvidia
from cudashim.hardware.visible import assign_visible_devices, visible_device_env_name

from hwtest import fresh_hardware_state, hwtrees  # noqa: E402,F401  (autouse fixture: a clean state per test)

TREES = hwtrees.TREES_DIR


def tree(name: str) -> str:
    return str(TREES / name)


@pytest.mark.parametrize(
    "name, kind, count",
    [
        ("h200x8", "nvidia", 8),
        ("ascend950x8", "ascend", 8),
        ("ascend910b", "ascend", 8),
        ("cpu_only", "cpu", 0),
        ("both_drivers", "ascend", 4),
    ],
)
def test_kind_and_count(name, kind, count):
    assert accelerator_kind(tree(name)) == kind
    assert device_count(root=tree(name)) == count


def test_h200_gpus_bus_ids_names_and_numa_split_4_4():
    gpus = discover_gpus(tree("h200x8"))
    assert [g.index for g in gpus] == list(range(8))
    assert [g.bus_id for g in gpus] == list(hwtrees.H200_BUSES)
    # no NVML under a fake root: the name comes from procfs, the capability is unknown
    assert {g.name for g in gpus} == {"NVIDIA H200"}
    assert {g.compute_capability for g in gpus} == {None}
    # GPU 7's node is only under /sys/bus/pci/drivers/nvidia/: the driver path is read too
    assert [g.numa_node for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_h200_capability_and_name_come_from_nvml_matched_by_bus_id():
    # NVML spells the domain with 8 digits and lists GPUs in its own order
    fake = [NvmlDevice(7 - i, f"NVIDIA H200 #{i}", (9, 0), f"00000000:{b[5:].upper()}")
            for i, b in enumerate(hwtrees.H200_BUSES)]
    gpus = discover_gpus(tree("h200x8"), nvml=lambda: list(reversed(fake)))
    assert [g.name for g in gpus] == [f"NVIDIA H200 #{i}" for i in range(8)]
    assert {g.compute_capability for g in gpus} == {(9, 0)}


def test_gpus_from_dev_nodes_when_procfs_is_absent(tmp_path):
    for i in range(2):
        hwtrees.write(tmp_path, f"dev/nvidia{i}")
    hwtrees.write(tmp_path, "dev/nvidiactl")
    hwtrees.write(tmp_path, "sys/bus/pci/devices/0000:9a:00.0/numa_node", "1\n")
    assert accelerator_kind(str(tmp_path)) == "nvidia"
    assert device_count(root=str(tmp_path)) == 2
    nv = [NvmlDevice(1, "NVIDIA H200", (9, 0), "00000000:9A:00.0")]
    gpus = discover_gpus(str(tmp_path), nvml=lambda: nv)
    assert [(g.index, g.bus_id, g.numa_node) for g in gpus] == [(0, None, None), (1, "0000:9a:00.0", 1)]


def test_ascend950_ubcore_entries_dead_entry_skipped_and_numa_from_raw_fallback():
    devs = discover_npu_devices(tree("ascend950x8"))
    assert [d.entry for d in devs] == [f"udma{i}" for i in range(8)]
    assert [d.physical_id for d in devs] == list(range(8))
    # raw sysfs nodes 0,0,0,0,2,2,2,2 and no npu-smi: (raw // 2) * 2 + index % 2
    assert [d.numa_node for d in devs] == [0, 1, 0, 1, 2, 3, 2, 3]


def test_ascend910b_numa_from_npu_smi_affinity_and_lscpu():
    devs = discover_npu_devices(tree("ascend910b"))
    assert [d.entry for d in devs] == [f"davinci{i}" for i in range(8)]
    # affinity 144-167 -> node 3 (144-191), 96-119 -> 2, 0-23 -> 0, 48-71 -> 1
    assert [d.numa_node for d in devs] == [3, 3, 2, 2, 0, 0, 1, 1]
    assert npu_numa_node(2, devices=devs) == 2


def test_both_drivers_ascend_wins_although_nvidia_is_present():
    assert nvidia.is_available(tree("both_drivers"))
    assert accelerator_kind(tree("both_drivers")) == "ascend"
    assert visible_device_env_name(root=tree("both_drivers")) == "ASCEND_RT_VISIBLE_DEVICES"


def test_numa_unknown_is_an_error_naming_the_device():
    # davinci nodes only, no npu-smi, no raw NUMA: nothing describes the placement
    with pytest.raises(HardwareError, match=r"device 1 \(davinci1") as info:
        npu_numa_node(1, root=tree("both_drivers"))
    assert "npu-smi" in str(info.value)
    with pytest.raises(HardwareError, match="index 9"):
        npu_numa_node(9, root=tree("both_drivers"))


def test_cpu_only_box():
    root = tree("cpu_only")
    assert accelerator_kind(root) == "cpu"
    assert discover_gpus(root) == [] and discover_npu_devices(root) == []
    assert numa_cpus(root) == {0: frozenset(range(8))}
    assert visible_device_env_name(root=root) == "CUDA_VISIBLE_DEVICES"


def test_root_comes_from_cudashim_sysroot(monkeypatch):
    monkeypatch.setenv("CUDASHIM_SYSROOT", tree("ascend950x8"))
    assert accelerator_kind() == "ascend"
    monkeypatch.setenv("CUDASHIM_SYSROOT", tree("h200x8"))
    assert accelerator_kind() == "nvidia"


def test_kind_is_cached_per_root_until_reset(tmp_path):
    hwtrees.write(tmp_path, "dev/null")
    assert accelerator_kind(str(tmp_path)) == "cpu"
    hwtrees.write(tmp_path, "dev/davinci_manager")
    assert accelerator_kind(str(tmp_path)) == "cpu"  # cached: devices are not hot-plugged
    _state.reset()
    assert accelerator_kind(str(tmp_path)) == "ascend"


def test_assign_visible_devices_on_trees():
    env: dict[str, str] = {}
    assert assign_visible_devices(1, 2, root=tree("h200x8"), environ=env) == (2, 3)
    assert assign_visible_devices(3, 2, root=tree("h200x8"), environ=env) == (6, 7)
    # an existing restriction is what ranks split
    env = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert assign_visible_devices(1, 2, root=tree("h200x8"), environ=env) == (6, 7)
    env = {"ASCEND_RT_VISIBLE_DEVICES": "7,3"}
    assert assign_visible_devices(1, 1, root=tree("ascend910b"), environ=env) == (3,)
    with pytest.raises(VisibilityError, match="LOCAL_RANK=2.*only 4 are available on nvidia"):
        assign_visible_devices(2, 2, root=tree("h200x8"), environ={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert assign_visible_devices(0, 2, available=[5, 1, 9]) == (5, 1)
    with pytest.raises(VisibilityError, match="LOCAL_RANK=-1"):
        assign_visible_devices(-1, 1, available=[0])
    with pytest.raises(VisibilityError, match="CUDASHIM_DEVICES_PER_RANK=0"):
        assign_visible_devices(0, 0, available=[0])


def test_committed_trees_match_the_builder(tmp_path):
    for name in hwtrees.TREES:
        built = hwtrees.build(name, tmp_path / name)
        committed = TREES / name
        expected = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
        actual = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
        assert actual == expected, f"{name}: run python tests/fixtures/hwtrees.py"
        for rel in expected:
            assert filecmp.cmp(built / rel, committed / rel, shallow=False), f"{name}/{rel} is stale"
            assert os.access(committed / rel, os.X_OK) == os.access(built / rel, os.X_OK), f"{name}/{rel} mode"
