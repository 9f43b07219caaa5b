"""The README's main command: `python -m cudashim run examples/serve.py` prints tokens/s and exits 0 on cpu."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_serve_runs_unchanged_on_cpu() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for var in ("CUDASHIM_PLATFORM", "CUDASHIM_DISABLE", "LOCAL_RANK", "WORLD_SIZE", "RANK"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "examples/serve.py", "--new-tokens", "8"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    m = re.search(r"serve: 1 rank\(s\) on CPU .*: (\d+) tokens, ([0-9.]+) tokens/s", proc.stdout)
    assert m, proc.stdout
    assert int(m.group(1)) == 4 * 8 and float(m.group(2)) > 0


def test_serve_without_shim_fails_on_this_machine() -> None:
    # the same file is genuinely CUDA-written: without the shim there is no CUDA (and no flash_attn) here
    env = dict(os.environ, CUDASHIM_DISABLE="1")
    proc = subprocess.run([sys.executable, "examples/serve.py", "--no-compile", "--new-tokens", "2"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
