"""Bad input gives "absent" (None, or the next source) or one clear error, never a crash or a hang."""

from __future__ import annotations

import shutil
import sys
import time
import types
from pathlib import Path

import pytest

from cudashim.errors import VisibilityError
from cudashim.hardware import (
    HardwareError,
    accelerator_kind,
    discover_gpus,
    discover_npu_devices,
    npu_numa_node,
    physical_cores_by_numa,
    query_nvml,
)
from cudashim.hardware import device, nvidia
from cudashim.hardware.visible import visible_device_env_name, visible_device_ids

from hwtest import fresh_hardware_state, hwtrees  # noqa: E402,F401  (autouse fixture: a clean state per test)


def copy_tree(name: str, dest: Path) -> Path:
    return Path(shutil.copytree(hwtrees.TREES_DIR / name, dest / name, symlinks=True))


# ---- visible-device strings ------------------------------------------------------------------

@pytest.mark.parametrize(
    "value, fragment",
    [
        ("a", "'a', which is not a device index"),
        ("0,,1", "empty entry at position 1"),
        ("0,1,", "empty entry at position 2"),
        ("0,-2", "negative id -2"),
        ("1, 1", "lists device 1 twice"),
        ("GPU-8f3a2c1e", "not UUIDs"),
        ("0;1", "'0;1'"),
        ("1.5", "'1.5'"),
        ("\u0663", "not a device index"),  # an Arabic-Indic digit: isdigit() but not a CUDA index
        ("-1,0", "negative id -1"),
    ],
)
def test_malformed_visible_devices_name_variable_and_value(value, fragment):
    with pytest.raises(VisibilityError) as info:
        visible_device_ids(value, "ASCEND_RT_VISIBLE_DEVICES")
    msg = str(info.value)
    assert msg.startswith(f"ASCEND_RT_VISIBLE_DEVICES={value!r}")
    assert fragment in msg


@pytest.mark.parametrize(
    "value, ids",
    [(None, None), ("", ()), ("-1", ()), ("  ", ()), (" -1 ", ()), (" 0 , 2,3 ", (0, 2, 3)), ("3,1", (3, 1))],
)
def test_visible_devices_accepted_forms(value, ids):
    assert visible_device_ids(value) == ids


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(HardwareError, match="unknown accelerator kind 'tpu'; use one of ascend, nvidia, cpu"):
        visible_device_env_name("tpu")


# ---- sysfs / procfs files ----------------------------------------------------------------------

def test_garbage_unreadable_and_missing_numa_files(tmp_path):
    root = copy_tree("h200x8", tmp_path)
    pci = root / "sys/bus/pci/devices"
    (pci / "0000:18:00.0/numa_node").write_text("garbage\n")
    (pci / "0000:2a:00.0/numa_node").write_bytes(b"\xff\xfe\x00")  # not UTF-8
    (pci / "0000:3a:00.0/numa_node").unlink()
    (pci / "0000:3a:00.0/numa_node").mkdir()  # reading it fails (even as root, unlike chmod 000)
    (pci / "0000:5d:00.0/numa_node").write_text("-1\n")  # the kernel's "no NUMA information"
    (pci / "0000:9a:00.0/numa_node").write_text("")
    (pci / "0000:ab:00.0/numa_node").write_text("+1\n")
    (root / "proc/driver/nvidia/gpus/0000:ba:00.0/information").write_bytes(b"\x00\xff garbage")
    gpus = discover_gpus(str(root))
    assert [g.numa_node for g in gpus] == [None, None, None, None, None, None, 1, 1]
    # garbage procfs text: still a GPU (it is listed), only its name is unknown
    assert len(gpus) == 8 and gpus[6].name is None and gpus[6].index == 6


def test_garbage_ub_totalues_is_not_a_device(tmp_path):
    for i, content in enumerate(("abc\n", "-3\n", "", "0x4\n")):
        hwtrees.write(tmp_path, f"sys/class/ubcore/udma{i}/device/ub_totalues", content)
    (tmp_path / "sys/class/ubcore/udma4/device/ub_totalues").mkdir(parents=True)
    assert accelerator_kind(str(tmp_path)) == "cpu"
    assert discover_npu_devices(str(tmp_path)) == []


def test_garbage_raw_numa_on_ubcore_means_unknown(tmp_path):
    root = copy_tree("ascend950x8", tmp_path)
    (root / "sys/class/ubcore/udma5/device/numa_node").write_text("node5\n")
    (root / "sys/class/ubcore/udma6/device/numa_node").write_text("-1\n")
    devs = discover_npu_devices(str(root))
    assert [d.numa_node for d in devs] == [0, 1, 0, 1, 2, None, None, 3]
    with pytest.raises(HardwareError, match=r"device 5 \(udma5, physical id 5\)"):
        npu_numa_node(5, devices=devs)


# ---- npu-smi ---------------------------------------------------------------------------------

NPU_SMI = "usr/local/sbin/npu-smi"


def test_npu_smi_missing_means_absent(tmp_path):
    root = copy_tree("ascend910b", tmp_path)
    (root / NPU_SMI).unlink()
    devs = discover_npu_devices(str(root))
    assert len(devs) == 8 and {d.numa_node for d in devs} == {None}
    with pytest.raises(HardwareError, match="davinci0"):
        npu_numa_node(0, devices=devs)


def test_npu_smi_not_executable_means_absent(tmp_path):
    root = copy_tree("ascend910b", tmp_path)
    (root / NPU_SMI).chmod(0o644)
    assert {d.numa_node for d in discover_npu_devices(str(root))} == {None}


@pytest.mark.parametrize(
    "output, exit_code",
    [
        ("Error: the device is busy\n", 0),
        ("NPU0 X 0-23\n", 0),  # rows without the header
        (hwtrees.npu_smi_topo(["0-23", "24-47"]), 2),  # a good table, but the tool says it failed
        (hwtrees.npu_smi_topo(["zz-top", "1-0"]), 0),  # affinity cells that are not cpulists
        ("\x00\x01\x02" * 100, 0),
    ],
)
def test_npu_smi_garbage_or_failure_means_absent(tmp_path, output, exit_code):
    root = copy_tree("ascend910b", tmp_path)
    hwtrees.script(root, NPU_SMI, output, exit_code=exit_code)
    assert {d.numa_node for d in discover_npu_devices(str(root))} == {None}


def _state_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_npu_smi_hanging_is_killed_at_the_timeout(tmp_path):
    root = copy_tree("ascend910b", tmp_path)
    pidfile = tmp_path / "child.pid"
    # a well-formed table arrives only after 60 s: seeing None proves we did not wait for it,
    # and the backgrounded child holding our stdout pipe must die with its process group
    good = hwtrees.npu_smi_topo(["144-167"] * 8)
    (root / NPU_SMI).write_text(
        "#!/bin/sh\n"
        f"sleep 60 & echo $! > {pidfile}\n"
        "wait\n"
        f"cat <<'EOF'\n{good}\nEOF\n"
    )
    devs = discover_npu_devices(str(root), npu_smi_timeout=0.3)
    assert {d.numa_node for d in devs} == {None}
    child = int(pidfile.read_text())
    for _ in range(200):  # SIGKILL is asynchronous; wait for it to land, not for a duration
        if _state_of(child) in (None, "Z"):
            break
        time.sleep(0.01)
    assert _state_of(child) in (None, "Z"), "the hung tool's child outlived the timeout"


# ---- lscpu -----------------------------------------------------------------------------------

LSCPU = "usr/bin/lscpu"


@pytest.mark.parametrize(
    "output",
    [
        "CPU(s): 192\nOn-line CPU(s) list: 0-191\n",  # plain lscpu instead of -p
        "0,0,0,0\n1,0,0,1\n",  # a column short
        "0,0,0,0,Y\n0,1,0,1,Y\n",  # the same CPU twice
        "0,zero,0,0,Y\n",
        "0,0,0,0,maybe\n",
        "",
    ],
)
def test_lscpu_garbage_falls_back_to_sysfs_node_lists(tmp_path, output):
    root = copy_tree("ascend910b", tmp_path)
    hwtrees.script(root, LSCPU, output)
    by_node = physical_cores_by_numa(str(root))
    assert by_node == {n: frozenset(range(48 * n, 48 * n + 48)) for n in range(4)}
    # and placement still works from the sysfs lists
    assert [d.numa_node for d in discover_npu_devices(str(root))] == [3, 3, 2, 2, 0, 0, 1, 1]


def test_lscpu_garbage_and_no_sysfs_means_absent(tmp_path):
    root = copy_tree("ascend910b", tmp_path)
    hwtrees.script(root, LSCPU, "garbage\n")
    shutil.rmtree(root / "sys/devices/system/node")
    assert physical_cores_by_numa(str(root)) is None
    assert {d.numa_node for d in discover_npu_devices(str(root))} == {None}


def test_lscpu_hanging_is_absent(tmp_path):
    root = copy_tree("ascend910b", tmp_path)
    hwtrees.script(root, LSCPU, hwtrees.lscpu_table([(0, 5, 0, 0, "Y")]), sleep=60)
    shutil.rmtree(root / "sys/devices/system/node")
    assert physical_cores_by_numa(str(root), timeout=0.3) is None


# ---- the command seam --------------------------------------------------------------------------

def test_fake_root_never_runs_host_tools(tmp_path):
    assert shutil.which("sh") is not None
    assert device.find_executable("sh", str(tmp_path)) is None
    assert device.run_command(["sh", "-c", "echo hi"], 5.0, str(tmp_path)) is None


def test_missing_binary_on_real_root_is_absent():
    assert device.run_command(["cudashim-no-such-tool-xyz"], 5.0, "/") is None


def test_run_command_returns_stdout_of_a_tool_under_the_root(tmp_path):
    hwtrees.script(tmp_path, "usr/bin/tool", "hello\n")
    assert device.run_command(["tool"], 5.0, str(tmp_path)) == "hello\n"


# ---- NVML --------------------------------------------------------------------------------------

class _FakeNvml(types.ModuleType):
    def __init__(self, fail_at: str | None = None):
        super().__init__("pynvml")
        self.calls: list[str] = []
        self.fail_at = fail_at

    def _call(self, name, value=None):
        self.calls.append(name)
        if name == self.fail_at:
            raise RuntimeError(f"NVML {name} failed")
        return value

    def nvmlInit(self):
        return self._call("init")

    def nvmlShutdown(self):
        return self._call("shutdown")

    def nvmlDeviceGetCount(self):
        return self._call("count", 2)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self._call("handle", i)

    def nvmlDeviceGetName(self, h):
        return self._call("name", b"NVIDIA H200")

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self._call("cc", (9, 0))

    def nvmlDeviceGetPciInfo(self, h):
        return self._call("pci", types.SimpleNamespace(busId=f"00000000:{0x18 + h:02X}:00.0".encode()))


def test_nvml_success_pairs_init_and_shutdown(monkeypatch):
    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    got = query_nvml()
    assert [(d.index, d.name, d.compute_capability, d.bus_id) for d in got] == [
        (0, "NVIDIA H200", (9, 0), "0000:18:00.0"),
        (1, "NVIDIA H200", (9, 0), "0000:19:00.0"),
    ]
    assert fake.calls[0] == "init" and fake.calls[-1] == "shutdown" and fake.calls.count("shutdown") == 1


def test_nvml_failure_halfway_still_shuts_down(monkeypatch):
    fake = _FakeNvml(fail_at="handle")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert query_nvml() is None
    assert fake.calls == ["init", "count", "handle", "shutdown"]


def test_nvml_init_failure_is_absent_without_shutdown(monkeypatch):
    fake = _FakeNvml(fail_at="init")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert query_nvml() is None
    assert fake.calls == ["init"]


def test_nvml_per_device_failures_leave_fields_unknown(monkeypatch):
    fake = _FakeNvml(fail_at="cc")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    got = query_nvml()
    assert [d.compute_capability for d in got] == [None, None] and got[0].name == "NVIDIA H200"


def test_pynvml_not_installed_is_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    assert query_nvml() is None


def test_nvml_is_not_consulted_under_a_fake_root(monkeypatch):
    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    discover_gpus(str(hwtrees.TREES_DIR / "h200x8"))
    assert fake.calls == []
    assert nvidia.normalize_bus_id("0000:18:00.0") == "0000:18:00.0"
