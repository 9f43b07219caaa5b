"""The graph-replay and meta-agreement oracles over op_db (verification/opdb_oracles.py), on a slice: each
operator captured in a CUDA graph, its inputs changed in place, the graph replayed and compared with the
operator run eagerly on the new inputs (CUDA passes by construction); and each aten operator a sample
reaches compared with its FakeTensor prediction. The slice holds operators whose kernels are the
device's own (SDPA's flash path, SVD, convolution, softmax), one whose out= overload differs from it
(binary_cross_entropy), one returning a list (histogramdd's edges), internal random draws (fractional
max pooling), a synchronizing one (nonzero) and plain ones. The full sweep's members and their reasons are benchmarks/results/opdb_oracle_members.json,
checked here to give every member a reason."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from emulated_run import REAL_CUDA, ROOT

SLICE = ["nn.functional.scaled_dot_product_attention", "linalg.svd", "nn.functional.conv2d",
         "_softmax_backward_data", "log_softmax", "nn.functional.binary_cross_entropy", "histogramdd",
         "nn.functional.fractional_max_pool2d", "nonzero", "mul", "index_put", "stft", "addmm"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("oracles") / "slice.json"
    cmd = [sys.executable, str(ROOT / "verification" / "opdb_sweep.py"), "--ops", *SLICE, "--dtypes", "float32",
           "--samples", "4", "--modes", "graph", "meta", "--jobs", "2", "--chunk", "7", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


pytestmark = [pytest.mark.slow, pytest.mark.skipif(REAL_CUDA, reason="the sweep runs on the emulated device")]


def test_slice_covers_every_op(sweep: dict) -> None:
    assert sorted(sweep["table"]) == sorted(SLICE)
    assert sweep["summary"]["graph"]["cases"] >= 40 and sweep["summary"]["meta"]["cases"] >= 40


def test_replay_reads_what_the_program_wrote(sweep: dict) -> None:
    bad = [f"{r['op']} #{r['sample']}: {r['code']} {r['detail'][:300]}" for r in sweep["not_equal"]
           if r["mode"] == "graph" and r["code"] not in ("=", "r", "e", "g")]
    assert not bad, "\n".join(bad)
    refused = {r["op"] for r in sweep["not_equal"] if r["mode"] == "graph" and r["code"] == "g"}
    assert refused <= {"nonzero", "index_put"}, refused  # they synchronize (boolean masks), as on CUDA


def test_outputs_as_their_meta_functions_promise(sweep: dict) -> None:
    bad = [f"{r['op']} #{r['sample']}: {r['detail'][:300]}" for r in sweep["not_equal"]
           if r["mode"] == "meta" and r["code"] == "m"]
    assert not bad, "\n".join(bad)


def test_every_member_of_the_full_sweep_has_a_reason() -> None:
    results = ROOT / "benchmarks" / "results" / "opdb_graph_meta_cuda.json"
    proc = subprocess.run([sys.executable, str(ROOT / "verification" / "opdb_oracle_members.py"), "--check",
                           str(results)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
