"""On an NVIDIA machine: `cudashim doctor --json` sees the GPU through NVML without creating a CUDA context.

Run on the H200 box with:  python3 -m pytest -q tests/gpu/test_doctor_gpu.py -rs
(or plainly: python3 tests/gpu/test_doctor_gpu.py)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.gpu


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_") and k != "PYTHONPATH"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def test_doctor_reports_one_h200():
    out = subprocess.run([sys.executable, "-m", "cudashim", "doctor", "--json"], capture_output=True, text=True,
                         env=_env(), cwd=REPO, timeout=300)
    print(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    rep = json.loads(out.stdout)
    assert rep["platform"]["name"] == "nvidia"
    devices = rep["hardware"]["devices"]
    assert len(devices) == 1, devices
    assert "H200" in devices[0]["name"] and devices[0]["compute_capability"] == [9, 0]
    assert rep["hardware"]["bf16_tflops_limit"] == 989.0


_NO_CONTEXT = """
import json, os, sys
from cudashim.cli.doctor import collect
report = collect()  # NVML probe, in this very process
assert "torch" not in sys.modules
# A CUDA context created by the probe would freeze visibility; hiding every GPU now must still work.
os.environ["CUDA_VISIBLE_DEVICES"] = ""
import torch
print(json.dumps({"devices_seen_by_doctor": len(report["hardware"]["devices"]),
                  "torch_device_count_after_hiding": torch.cuda.device_count(),
                  "pid": os.getpid()}))
"""


def test_doctor_creates_no_cuda_context():
    out = subprocess.run([sys.executable, "-c", _NO_CONTEXT], capture_output=True, text=True, env=_env(),
                         cwd=REPO, timeout=300)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["devices_seen_by_doctor"] >= 1
    assert result["torch_device_count_after_hiding"] == 0


if __name__ == "__main__":
    raise SystemExit(pytest.main(["-q", "-rs", "-s", __file__]))
