"""The corpus: unmodified Triton kernels from pinned libraries (tests/requirements-subjects.txt) run on
the emulated device through the Triton route, each equal to its torch reference or a float64 oracle
within the kernel's own precision (scripts/corpus.py computes the references; the tolerances are there).

No PyPI distribution ships Triton's tutorials, so their patterns come from pinned libraries that ship
them: a vector add (fla-core), the fused softmax (Liger-Kernel), layer norm forward and backward with its
atomic lock (trinix), the autotuned matmul with a nested activation (fla-core); the tutorials' host line
`DEVICE = triton.runtime.driver.active.get_active_torch_device()` is a line of scripts/corpus.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# nano-vllm's patch map stands flash_attn in (nanovllm.layers.attention imports it); its store_kvcache
# line is gone, so the store kernel is nano-vllm's own
CONFIG = ROOT / "examples" / "nano_vllm" / "cudashim.toml"

NEEDS = {"liger": "liger_kernel", "fla": "fla", "nano_vllm": "nanovllm", "trinix": "trinix", "host": "triton"}
CASES = ["host_driver_device", "fla_vector_add", "liger_softmax", "trinix_layer_norm", "fla_matmul",
         "liger_rmsnorm_fp32", "liger_rmsnorm_bf16", "liger_cross_entropy", "liger_swiglu", "liger_rope",
         "fla_chunk_local_cumsum", "fla_chunk_simple_gla", "nano_vllm_store_kvcache"]


def _needs(case: str) -> str:
    return next(mod for prefix, mod in NEEDS.items() if case.startswith(prefix))


@pytest.fixture(scope="module")
def outcomes() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    present = [c for c in CASES if importlib.util.find_spec(_needs(c)) is not None]
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--config", str(CONFIG),
                           str(HERE / "scripts" / "corpus.py"), *present], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_kernel_equals_its_reference(outcomes: dict, case: str) -> None:
    if case not in outcomes:
        pytest.skip(f"{_needs(case)} is not installed: pip install -r tests/requirements-subjects.txt")
    kind, detail = outcomes[case]
    assert kind == "ok", f"{kind}: {detail}"
    assert detail["ok"], detail


def test_autotuned_matmul_chose_the_first_configuration(outcomes: dict) -> None:
    if "fla_matmul" not in outcomes:
        pytest.skip("fla is not installed: pip install -r tests/requirements-subjects.txt")
    kind, detail = outcomes["fla_matmul"]
    assert kind == "ok", detail
    assert detail["chosen"] == {"BM": 128, "BK": 64, "BN": 256, "G": 4}  # fla's first triton.Config
