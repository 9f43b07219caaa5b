"""`cudashim run torchrun --standalone --nproc_per_node=2` on NCCL-written programs gives the right answers on cpu."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _torchrun(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    launcher = ["torchrun"] if shutil.which("torchrun") else ["-m", "torch.distributed.run"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for var in ("CUDASHIM_CPU_DEVICES", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", *launcher, "--standalone",
           "--nproc_per_node=2", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_nccl_allreduce_two_ranks() -> None:
    proc = _torchrun(str(HERE / "scripts" / "allreduce.py"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    # two ranks share the pipe, so their lines may interleave: pick the objects out, not the lines
    rows = [json.loads(m) for m in re.findall(r"RESULT (\{[^{}]*\})", proc.stdout)]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    for r in rows:
        assert r["sum"] == [float(1 + 2)] * 4  # rank 0 contributes 1, rank 1 contributes 2
        assert r["backend"] == "nccl"  # the name the program gave, as on a GPU (Gloo does the work)
        assert r["device_count"] == 2  # LOCAL_WORLD_SIZE, so set_device(local_rank) is valid
        assert r["current_device"] == r["rank"]


def test_serve_example_two_ranks() -> None:
    proc = _torchrun(str(ROOT / "examples" / "serve.py"), "--no-compile", "--new-tokens", "8")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("serve:"))
    assert "2 rank(s)" in line and "tokens/s" in line
    assert " 64 tokens" in line  # 2 ranks x batch 4 x 8 new tokens, summed over the NCCL group
