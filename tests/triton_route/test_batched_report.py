"""`cudashim run --report` says, per Triton kernel, which execution it got and why: "batched" (all program
instances at once) or "interpreter|batched: <reason>" where the batched execution declined."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_report_names_each_kernels_execution_and_reason(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--report", str(report),
                           str(HERE / "scripts" / "batched_report.py")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    checks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert checks == {"axpy": True, "atomics": True, "divergent": True, "histogram": True}
    paths = {k["kernel"].rpartition(":")[2]: k["paths"] for k in json.loads(report.read_text())["triton_kernels"]}
    assert paths["axpy_kernel"] == {"batched": 3}
    assert paths["atomic_sum_kernel"] == {"interpreter|batched: atomics across instances: exact interpreter": 1}
    (divergent,) = paths["divergent_loop_kernel"]
    assert divergent.startswith("interpreter|batched: divergent control flow at batched_kernels.py:")
    assert paths["histogram_kernel"] == {"interpreter|batched: unsupported op create_histogram: exact interpreter": 1}
