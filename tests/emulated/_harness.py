"""How tests/emulated runs its checks (imported by its test modules): under the emulated device (`cudashim run --platform cpu`,
CUDASHIM_CPU_BACKEND=device) on a machine without a GPU, and with no shim at all where torch.cuda is
really available, so CUDA itself is the oracle for the same checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _real_cuda() -> bool:
    # a child asks, so this process's torch stays unimported and unshimmed
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    env = dict(os.environ, CUDASHIM_DISABLE="1")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300).returncode == 0


REAL_CUDA = _real_cuda()


def run_python(args: list[str], extra_env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """python ARGS on real CUDA, else `python -m cudashim run --platform cpu ARGS` on the device."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(extra_env or {}))
    if REAL_CUDA:
        env["CUDASHIM_DISABLE"] = "1"
        cmd = [sys.executable, *args]
    else:
        env.pop("CUDASHIM_DISABLE", None)
        env["CUDASHIM_CPU_BACKEND"] = "device"
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)

