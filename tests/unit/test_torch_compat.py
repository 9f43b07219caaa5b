"""The torch releases and builds the shim supports, and the decisions it makes where they differ
(cudashim/_torch_compat.py): the range in one place, said the same by pyproject.toml and the README,
an unsupported torch refused at activation before anything registers with torch, and the torch-npu
release the simulated NPU reads chosen from the installed torch."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cudashim import _torch_compat

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version, want", [("2.13.0+cpu", (2, 13)), ("2.14.1+cu130", (2, 14)), ("2.15.0", (2, 15)),
                                           ("2.4.1", (2, 4)), ("2.16.0.dev20260101", (2, 16)), ("garbage", (0, 0))])
def test_release_reads_major_minor(version: str, want: tuple[int, int]) -> None:
    assert _torch_compat.release(version) == want


@pytest.mark.parametrize("torch_version, npu", [("2.13.0+cpu", "2.13.0"), ("2.13.0", "2.13.0"), ("2.14.1+cu130", "2.14.0"),
                                                ("2.15.0", "2.14.0"), ("2.12.0", "2.13.0")])
def test_torch_npu_release_follows_torch(torch_version: str, npu: str) -> None:
    assert _torch_compat.torch_npu_release(torch_version) == npu


def test_range_said_the_same_everywhere() -> None:
    spec = _torch_compat.SUPPORTED_SPEC
    (lo_a, lo_b), (hi_a, hi_b) = _torch_compat.SUPPORTED
    assert spec == f">={lo_a}.{lo_b},<{hi_a}.{hi_b + 1}"
    assert f"torch{spec}" in (REPO / "pyproject.toml").read_text()
    readme = (REPO / "README.md").read_text()
    assert f"(`{spec}`)" in readme
    named = re.search(r"\*\*Supported torch: ([\d., and]+)\*\*", readme)
    assert named is not None
    assert re.findall(r"\d+\.\d+", named.group(1)) == [f"{lo_a}.{m}" for m in range(lo_b, hi_b + 1)]


_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])  # this checkout, without its sitecustomize (which would activate before the fake)
import warnings
warnings.simplefilter("ignore")
import torch
torch.__version__ = "2.4.1"  # what an unsupported install reports; the check reads the loaded torch
import cudashim
try:
    cudashim.activate("cpu")
except Exception as e:
    print("ERROR", type(e).__name__, e)
print("REGISTERED", torch._C._dispatch_has_kernel_for_dispatch_key("aten::empty_strided", "CUDA")
      if not torch.version.cuda else "n/a")
"""


@pytest.mark.subprocess
def test_unsupported_torch_gets_the_range_at_activation() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(REPO)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=str(REPO / "tests"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("ERROR"))
    assert "UnsupportedTorchError" in line
    assert "torch 2.4.1" in line and _torch_compat.SUPPORTED_SPEC in line and "2.13 to 2.15" in line
    # refused before the emulated device registered anything with torch (no kernel for the CUDA key)
    assert "REGISTERED False" in proc.stdout or "REGISTERED n/a" in proc.stdout


def test_npu_data_kept_per_release_and_chosen_from_the_release() -> None:
    from cudashim.emulated.npu import coverage

    ops_213 = coverage.release_file("torch_npu_ops.json", "2.13.0")
    ops_214 = coverage.release_file("torch_npu_ops.json", "2.14.0")
    assert ops_213.parent.name == "2.13.0" and ops_214.parent.name == "2.14.0"
    import json

    for path, release in ((ops_213, "2.13.0"), (ops_214, "2.14.0")):
        data = json.loads(path.read_text())
        assert data["torch_npu"] == release and data["wheel"].startswith(f"torch_npu-{release}-")
        assert all(re.fullmatch(r"[0-9a-f]{40}", s["commit"]) for s in data["sources"])  # cited by commit
    checks = json.loads(coverage.release_file("torch_npu_dtype_checks.json", "2.14.0").read_text())
    table = json.loads(ops_214.read_text())
    assert {s["commit"] for s in checks["sources"]} == {s["commit"] for s in table["sources"]}
    # no documentation of 2.14.0 in its sources yet: its dtype rules are the newest release's below it
    assert coverage.release_file("torch_npu_dtypes.json", "2.14.0").parent.name == "2.13.0"
