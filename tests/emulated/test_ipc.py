"""Device tensors across processes (torch.multiprocessing, spawn and forkserver) with CUDA IPC's
semantics: a queue round trip where writes on either side are seen by the other and a tensor made by
the child arrives, and a model shared by two training processes (hogwild-style) whose parameters and
losses equal the same program's on CPU tensors under plain torch (the oracle: shared CPU memory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from emulated_run import HERE, ROOT, run_python


def _run(device: str, method: str) -> dict:
    args = [str(HERE / "_ipc_worker.py"), device, method]
    if device == "cpu":  # the oracle: plain torch, no shim
        env = dict(os.environ, CUDASHIM_DISABLE="1", PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    else:
        proc = run_python(args, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_device_tensors_across_processes_equal_the_cpu_run(method: str) -> None:
    got = _run("cuda", method)
    assert got["round_trip"] == {"child_saw": True, "child_wrote": [10.0, 11.0, 12.0, 13.0],
                                 "made": [110.0, 111.0, 112.0, 113.0], "made_device": "cuda",
                                 "child_saw_later_write": [20.0, 22.0, 24.0, 26.0]}, got["round_trip"]
    assert got["param_device"] == "cuda"
    want = _run("cpu", method)
    assert want["round_trip"]["child_wrote"] == got["round_trip"]["child_wrote"]
    exit_codes = got["exitcodes_and_losses"][0::2]
    assert exit_codes == [0, 0], got["exitcodes_and_losses"]
    # the parent saw each child's updates: the losses after each trainer, and the final parameters
    assert got["exitcodes_and_losses"] == pytest.approx(want["exitcodes_and_losses"], rel=1e-5, abs=1e-6)
    for g, w in zip(got["params"], want["params"]):
        assert g == pytest.approx(w, rel=1e-5, abs=1e-6)
    assert got["params"] != [[0.0] * len(p) for p in got["params"]]
