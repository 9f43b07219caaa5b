"""On an NVIDIA machine: `cudashim run` detects nvidia, passes CUDA through, and creates no CUDA context.

Run on the H200 box with:  python3 -m pytest -q tests/subprocess/test_activation_gpu.py -rs
(or plainly: python3 tests/subprocess/test_activation_gpu.py)
"""

from __future__ import annotations

import json

import pytest


pytestmark = pytest.mark.gpu

_PROBE = """\
import json, os, cudashim as b
status = b.status()
import torch
before = torch.cuda.is_initialized()
available = torch.cuda.is_available()  # NVML-based: still no context
after_check = torch.cuda.is_initialized()
print(json.dumps([status["platform"], os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"), before, available,
                  after_check, torch.cuda.device_count(), os.environ.get("CUDA_VISIBLE_DEVICES")]))
"""


def _real(shim, **extra):
    return shim.env(CUDASHIM_SYSROOT=None, **extra)  # detect on the real machine


def test_hello_cuda_passes_through_on_nvidia(shim, tmp_path):
    r = shim.run([str(shim.repo / "examples" / "hello_cuda.py")], _real(shim), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "hello from NVIDIA" in r.stdout and "on cuda:0" in r.stdout


def test_bootstrap_and_hook_create_no_cuda_context(shim, tmp_path):
    r = shim.run(["-c", _PROBE], _real(shim), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    platform, nvml_check, before, available, after_check, count, visible = json.loads(r.stdout.splitlines()[-1])
    assert (platform, nvml_check, before, available, after_check) == ("nvidia", "1", False, True, False)
    assert count >= 1 and visible is None


def test_each_rank_sees_only_its_devices(shim, tmp_path):
    r = shim.run(["-c", _PROBE], _real(shim, LOCAL_RANK="0", CUDASHIM_DEVICES_PER_RANK="1"), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    *_, count, visible = json.loads(r.stdout.splitlines()[-1])
    assert (count, visible) == (1, "0")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-rs"]))
