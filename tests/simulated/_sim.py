"""How tests/simulated runs a program on the simulated Ascend NPU: `cudashim run --platform ascend --simulate`
in a fresh interpreter, skipping (with the reason) when the torch-npu wheel cannot be fetched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudashim.emulated.npu.site import fetch_wheel

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["ROOT", "need_wheel", "run_sim", "run_readiness"]


def need_wheel() -> Path:
    wheel, why = fetch_wheel()
    if wheel is None:
        pytest.skip(f"the simulated NPU reads the torch-npu wheel: {why}")
    return wheel


def run_sim(args: list[str], extra_env: dict[str, str] | None = None, timeout: int = 900,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDASHIM_", "ASCEND_RT_", "CUDA_VISIBLE"))}
    for keep in ("CUDASHIM_BUILD_DIR", "CUDASHIM_WHEEL_CACHE"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    env.update(PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false", **(extra_env or {}))
    cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "ascend", "--simulate", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_readiness(tmp_path: Path, program: str) -> tuple[Path, subprocess.CompletedProcess, dict]:
    """Run `program` (written to tmp_path/prog.py) with the report on: (its path, the run, npu_readiness)."""
    import json

    need_wheel()
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    out = tmp_path / "r.json"
    r = run_sim(["--report", str(out), str(prog)])
    assert r.returncode == 0, r.stderr[-4000:]
    return prog, r, json.loads(out.read_text())["npu_readiness"]
