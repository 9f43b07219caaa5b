"""What the cpu platform does not emulate fails loudly, at construction or first call, naming the API and the way out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# case -> (words the message must hold: the API, and the way out)
EXPECT = {
    "symm_mem.empty": ("_symmetric_memory.empty", "collectives"),
    "symm_mem.rendezvous": ("_symmetric_memory.rendezvous", "collectives"),
    "cpp_extension.load .cu": ("cpp_extension.load('k')", "tool.cudashim.patches"),
    "cpp_extension.load_inline cuda": ("load_inline('k')", "tool.cudashim.patches"),
    "CUDAExtension": ("CUDAExtension('k')", "tool.cudashim.patches"),
    "triton compiled kernel": ("add_one", ".n_regs", "tool.cudashim.patches"),
    "ProcessGroupNCCL(...)": ("ProcessGroupNCCL(store, rank, size, options)", "init_process_group(\"nccl\")"),
    "torch.cuda.nccl.all_reduce": ("torch.cuda.nccl.all_reduce", "init_process_group(\"nccl\")"),
    "nccl group backend comm_split_count": ("comm_split_count", "ProcessGroupNCCL"),
}


@pytest.fixture(scope="module")
def outcomes() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", str(HERE / "scripts" / "limits.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_fails_loudly(outcomes: dict, case: str) -> None:
    kind, message = outcomes[case]
    if kind == "skipped":
        pytest.skip(message)
    assert kind == "CapabilityError", message
    for word in EXPECT[case] + ("cpu",):
        assert word in message, f"{word!r} missing from: {message}"


def test_cuda_graphs_are_emulated_not_refused(outcomes: dict) -> None:
    assert outcomes["CUDAGraph capture + replay"] == [None, "no error"]
