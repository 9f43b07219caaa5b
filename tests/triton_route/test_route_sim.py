"""The Triton route on the simulated Ascend NPU (`--platform ascend --simulate`): the same launch seam
and in-place interpreter over the simulated NPU's memory, so triton-ascend's checks can plug into the
seam's launch check for platform "ascend". L1s: nothing here says how a kernel runs on an NPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = ["jit_type", "vector_add", "in_place", "float_scalar", "bf16_add", "graph_replay", "seam", "cpu_tensor", "n_regs"]


@pytest.fixture(scope="module")
def sim() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "ascend", "--simulate",
                           str(HERE / "scripts" / "route_cases.py"), *CASES], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0 and "torch-npu" in proc.stderr and "wheel" in proc.stderr:
        pytest.skip("the torch-npu wheel is not fetched: run scripts/install")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["vector_add", "float_scalar", "bf16_add"])
def test_kernels_compute_on_the_simulated_npu(sim: dict, case: str) -> None:
    assert sim[case] == ["ok", True]


def test_jit_returns_a_jitfunction_and_launches_in_place(sim: dict) -> None:
    assert sim["jit_type"] == ["ok", "JITFunction"]
    assert sim["in_place"] == ["ok", {"copied_bytes": 0, "written": True, "untouched": 0.0}]


def test_npu_graph_replays_the_launch(sim: dict) -> None:
    assert sim["graph_replay"] == ["ok", {"first": True, "second": True}]


def test_launch_check_for_ascend_sees_every_launch(sim: dict) -> None:
    kind, r = sim["seam"]
    assert kind == "ok" and r["seen"] and r["taken"] and r["declined_ran_interpreter"]


def test_refusals_name_the_platform(sim: dict) -> None:
    assert sim["cpu_tensor"][0] == "ValueError"
    kind, message = sim["n_regs"]
    assert kind == "CapabilityError" and "ascend platform" in message
