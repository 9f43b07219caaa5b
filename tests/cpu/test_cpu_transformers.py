"""A Hugging Face model written for CUDA gives the CPU-written results under the cpu alias layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_llama_generate_and_train_step_match_cpu() -> None:
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error")
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu",
                           str(HERE / "scripts" / "hf_generate.py")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["shim_was_on"]
    assert r["cuda"] == r["cpu"]
    assert len(r["cpu"][0][0]) == 4 + 6
