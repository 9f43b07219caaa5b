"""`import cudashim.hardware` and detection keep torch, pynvml and extensions out of the process.

Runs in a fresh interpreter: the test process itself may already hold torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
import cudashim.hardware as hw, cudashim.hardware.visible as visible
before = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)
kind = hw.accelerator_kind()
n = hw.device_count()
name = visible.visible_device_env_name()
after = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)
print(json.dumps({"before": before, "after": after, "kind": kind, "n": n, "name": name}))
"""

HEAVY = {"torch", "pynvml", "torch_npu", "tilelang", "triton", "numpy", "cudashim._so"}


def _run(sysroot: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), CUDASHIM_SYSROOT=sysroot)
    code = f"HEAVY = {sorted(HEAVY)!r}\n" + _PROBE
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_and_detection_import_nothing_heavy():
    got = _run(str(REPO / "tests/fixtures/trees/h200x8"))
    assert got["before"] == [] and got["after"] == []
    # the probe really ran against the tree (a silent failure would also import nothing)
    assert (got["kind"], got["n"], got["name"]) == ("nvidia", 8, "CUDA_VISIBLE_DEVICES")


def test_real_machine_detection_imports_nothing_heavy():
    got = _run("/")
    assert got["before"] == [] and got["after"] == []
    assert got["kind"] in ("ascend", "nvidia", "cpu")
