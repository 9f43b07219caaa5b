"""A Hugging Face model written for CUDA gives the CPU-written results on the cpu platform's emulated device."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# find_spec, not an import: the tests run transformers in children; importing it here costs every
# xdist worker seconds at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed: run scripts/install")

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
    (tokens, loss, grad), (want_tokens, want_loss, want_grad) = r["cuda"], r["cpu"]
    assert tokens == want_tokens
    # the training step runs under autocast: "cuda" casts by CUDA's op lists, "cpu" by the CPU's, so
    # bfloat16 rounding differs in places (as it does between a GPU and a CPU)
    assert loss == pytest.approx(want_loss, rel=1e-2) and grad == pytest.approx(want_grad, rel=1e-2)
    assert (loss, grad) != (0.0, 0.0)
    assert len(r["cpu"][0][0]) == 4 + 6
