"""`cudashim doctor` on the fixture trees (CUDASHIM_SYSROOT), in fresh interpreters: what it reports and what it
does not import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudashim import envs
from cudashim.platform import capabilities
from cudashim.hardware import discover_npu_devices

REPO = Path(__file__).resolve().parents[2]
TREES = REPO / "tests" / "fixtures" / "trees"
HEAVY = ("torch", "pynvml", "torch_npu", "tilelang", "numpy")

# doctor in a fresh interpreter; the report on stdout, the heavy modules it left loaded on stderr
_PROBE = (
    "import sys, json\n"
    "from cudashim.cli.doctor import main\n"
    "rc = main(sys.argv[1:])\n"
    f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
    "sys.stderr.write('\\nHEAVY=' + json.dumps(heavy) + '\\n')\n"
    "raise SystemExit(rc)\n"
)


def _clean_env() -> dict[str, str]:
    # No PYTHONPATH: the repo's sitecustomize trampoline would shim the doctor process itself (and set
    # the very variables it reports). cwd=REPO puts the package on sys.path for -c and -m.
    return {k: v for k, v in os.environ.items()
            if not k.startswith("CUDASHIM_") and k not in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")}


def _doctor(*args: str, tree: str | None = "cpu_only", **env: str) -> tuple[int, str, list[str]]:
    environ = _clean_env()
    if tree is not None:
        environ["CUDASHIM_SYSROOT"] = str(TREES / tree)
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=environ,
                         cwd=REPO, timeout=120)
    heavy = json.loads(out.stderr.rsplit("HEAVY=", 1)[1]) if "HEAVY=" in out.stderr else None
    assert heavy is not None, out.stderr
    return out.returncode, out.stdout, heavy


def _json(*args: str, **kw: str) -> tuple[int, dict, list[str]]:
    rc, out, heavy = _doctor("--json", *args, **kw)
    return rc, json.loads(out), heavy


def test_h200_tree():
    rc, rep, heavy = _json(tree="h200x8")
    assert rc == 0 and rep["problems"] == []
    assert rep["platform"]["name"] == "nvidia" and "NVIDIA GPU" in rep["platform"]["reason"]
    assert heavy == []  # no torch, and no NVML under a fake root
    base = TREES / "h200x8"
    buses = sorted(p.name for p in (base / "proc/driver/nvidia/gpus").iterdir())
    devices = rep["hardware"]["devices"]
    assert sorted(d["bus_id"] for d in devices) == buses
    for d in devices:
        # the tree keeps one GPU's node only under the driver's path, as some kernels do
        paths = [base / "sys/bus/pci/devices" / d["bus_id"] / "numa_node",
                 base / "sys/bus/pci/drivers/nvidia" / d["bus_id"] / "numa_node"]
        numa = int(next(p for p in paths if p.exists()).read_text())
        assert d["numa_node"] == numa and "H200" in d["name"]
    assert rep["hardware"]["bf16_tflops_limit"] == 989.0
    assert rep["visible_devices"]["reads"] == "CUDA_VISIBLE_DEVICES"
    assert rep["capabilities"]["force_topk_bound"]["limit"] == 16384


@pytest.mark.parametrize("tree", ["ascend950x8", "ascend910b", "both_drivers"])
def test_ascend_trees(tree):
    rc, rep, heavy = _json(tree=tree)
    assert rc == 0 and heavy == []
    assert rep["platform"]["name"] == "ascend" and rep["platform"]["fp8_sf_type"] == "torch.int16"
    expected = discover_npu_devices(str(TREES / tree))
    assert [(d["entry"], d["physical_id"], d["numa_node"]) for d in rep["hardware"]["devices"]] == \
        [tuple(d) for d in expected] and expected
    assert rep["visible_devices"]["reads"] == "ASCEND_RT_VISIBLE_DEVICES"
    assert rep["capabilities"]["cuda_graph_keep_graph"]["status"] == "unsupported"
    rules = [r for r in getattr(envs, "PLATFORM_ENV", ()) if r.platform == "ascend"]
    assert [r["name"] for r in rep["environment"]["rules"]] == [r.name for r in rules]
    if hasattr(envs, "apply_platform_env"):
        copy: dict[str, str] = {}
        envs.apply_platform_env("ascend", copy)
        assert rep["environment"]["would_set"] == copy


def test_ubcore_tree_has_a_peak_and_davinci_tree_has_none():
    assert _json(tree="ascend950x8")[1]["hardware"]["bf16_tflops_limit"] == 432.0
    assert _json(tree="ascend910b")[1]["hardware"]["bf16_tflops_limit"] is None


def test_cpu_tree_and_an_explicit_user_value_wins():
    rc, rep, heavy = _json(tree="cpu_only")
    assert rc == 0 and heavy == [] and rep["platform"]["name"] == "cpu" and rep["hardware"]["devices"] == []
    assert {c: v["status"] for c, v in rep["capabilities"].items()} == \
        {c.id: c.cells["cpu"].status for c in capabilities.TABLE}


def test_override_reason_and_explicit_env_kept():
    rc, rep, _ = _json(tree="h200x8", CUDASHIM_PLATFORM="ascend", HCCL_CONNECT_TIMEOUT="999")
    assert rep["platform"]["name"] == "ascend" and "CUDASHIM_PLATFORM" in rep["platform"]["reason"]
    assert rep["hardware"]["detected"] == "nvidia"  # the hardware is still reported as it is
    if any(r.name == "HCCL_CONNECT_TIMEOUT" for r in getattr(envs, "PLATFORM_ENV", ())):
        assert "HCCL_CONNECT_TIMEOUT" not in rep["environment"]["would_set"]


def test_problems_are_reported_not_raised():
    rc, rep, _ = _json(tree="cpu_only", CUDASHIM_PLATFORM="tpu", CUDA_VISIBLE_DEVICES="0,x")
    assert rc == 1
    text = "\n".join(rep["problems"])
    assert "CUDASHIM_PLATFORM" in text and "CUDA_VISIBLE_DEVICES" in text
    assert rep["platform"]["name"] == "cpu"  # fell back to detection


def test_text_report():
    rc, out, heavy = _doctor(tree="h200x8")
    assert rc == 0 and heavy == []
    assert out.startswith("platform: nvidia") and "NUMA node" in out and "capabilities on nvidia" in out
    assert "nvidia-ml-py" in out


def test_torch_only_with_the_flag(monkeypatch, capsys):
    # in-process: torch is already loaded here, and a fresh interpreter importing it costs seconds;
    # the subprocess tests above prove torch stays out without the flag
    import torch

    from cudashim import _state
    from cudashim.cli.doctor import main

    monkeypatch.setenv("CUDASHIM_SYSROOT", str(TREES / "cpu_only"))
    monkeypatch.delenv("CUDASHIM_PLATFORM", raising=False)
    _state.reset()
    try:
        assert main(["--json", "--torch"]) == 0
    finally:
        _state.reset()
    rep = json.loads(capsys.readouterr().out)
    assert rep["torch"]["version"] == torch.__version__ and rep["torch"]["cuda_available"] is False
    assert json.loads(_doctor("--json", tree="cpu_only")[1])["torch"] is None


def test_packages_come_from_metadata():
    from importlib.metadata import version

    rep = _json(tree="cpu_only")[1]
    assert rep["packages"]["torch"] == version("torch")
    assert rep["packages"]["nvidia-ml-py"] == version("nvidia-ml-py")


def test_cli_dispatch():
    environ = dict(_clean_env(), CUDASHIM_SYSROOT=str(TREES / "cpu_only"))
    out = subprocess.run([sys.executable, "-m", "cudashim", "doctor", "--json"], capture_output=True, text=True,
                         env=environ, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["platform"]["name"] == "cpu"


def test_doctor_reports_what_the_shim_did_in_its_own_process(tmp_path):
    """`this_process` is cudashim.status(): off (and why) when started plainly, active under `run`."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_") and k != "PYTHONPATH"}
    env["CUDASHIM_PLATFORM"] = "cpu"
    plain = subprocess.run([sys.executable, "-m", "cudashim", "doctor", "--json"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    shimmed = subprocess.run([sys.executable, "-m", "cudashim", "run", "-m", "cudashim", "doctor", "--json"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and shimmed.returncode == 0, plain.stderr + shimmed.stderr
    off, on = json.loads(plain.stdout)["this_process"], json.loads(shimmed.stdout)["this_process"]
    assert off["active"] is False and "not switched on" in off["why_off"]
    assert on["active"] is True and on["why_off"] is None
    assert (on["source"], on["platform"], on["hook"]) == ("bootstrap", "cpu", "armed")
    assert on["platform_reason"].startswith("CUDASHIM_PLATFORM=cpu") and on["config"] is None
