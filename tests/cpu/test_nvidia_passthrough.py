"""On nvidia nothing is aliased: the CPU target's layer stays out (CI), and the serve example runs on a real GPU (H200)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, torch, cudashim.installers as a
print(json.dumps({"installed": a.installed(), "is_available_module": torch.cuda.is_available.__module__,
                  "to_is_builtin": type(torch.Tensor.to).__name__, "empty_is_builtin": type(torch.empty).__name__}))
"""


def _env() -> dict:
    env = dict(os.environ)
    for var in ("CUDASHIM_PLATFORM", "CUDASHIM_DISABLE"):
        env.pop(var, None)
    return env


def test_platform_nvidia_aliases_nothing() -> None:
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "nvidia", "-c", _PROBE], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r == {"installed": None, "is_available_module": "torch.cuda", "to_is_builtin": "method_descriptor",
                 "empty_is_builtin": "builtin_function_or_method"}


@pytest.mark.gpu(torch=True)
def test_serve_runs_unchanged_on_a_gpu() -> None:
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "nvidia", "examples/serve.py",
                           "--new-tokens", "16"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    m = re.search(r"serve: 1 rank\(s\) on (.*?): (\d+) tokens, ([0-9.]+) tokens/s", proc.stdout)
    assert m, proc.stdout
    assert not m.group(1).startswith("CPU ("), "the GPU must be the real one, nothing aliased"
    assert int(m.group(2)) == 4 * 16
