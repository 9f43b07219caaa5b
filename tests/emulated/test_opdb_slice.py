"""A fixed slice of the operator-database sweep (verification/opdb_sweep.py): the emulated device
against CPU tensors over PyTorch's own OpInfo sample inputs, forward, backward and error inputs.

The slice holds one operator of each class of defect the full sweep found: convolution choosing a
CUDA-only backend (depthwise, slow CUDA kernels) forward and in its backward's DispatchStubs, bfloat16
convolutions taking another CPU algorithm than the CPU, cuDNN-only predicates (ctc_loss), batch norm,
boolean-mask indexing and the data-dependent operators, complex dtypes; sparse COO and CSR tensors on the
device (to_sparse, sparse.sampled_addmm, sparse.mm.reduce), an out= argument overlapping an input
(take's error inputs), CPU kernels beside a composite for the other backends (silu's backward), and
the sweep's own placement of host-side arguments and outputs (tensor_split, arange).
Every case must be equal to the CPU's bits (the device's promise, not CUDA's: skipped under real CUDA);
an error input the device treats as the CPU does (`c`) is equal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from emulated_run import REAL_CUDA, ROOT

pytestmark = pytest.mark.skipif(REAL_CUDA, reason="the device's promise (CPU kernels), not CUDA's")

SLICE = ["nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d",
         "nn.functional.ctc_loss", "nn.functional.batch_norm", "masked_select", "nonzero", "index_put",
         "__getitem__", "mul", "unique", "to_sparse", "sparse.sampled_addmm", "sparse.mm.reduce",
         "take", "nn.functional.silu", "tensor_split", "arange"]
DTYPES = ["float32", "float64", "bfloat16", "complex64", "int64", "bool"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("opdb") / "slice.json"
    cmd = [sys.executable, str(ROOT / "verification" / "opdb_sweep.py"), "--ops", *SLICE, "--dtypes", *DTYPES,
           "--samples", "30", "--jobs", "2", "--chunk", "6", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_slice_covers_every_op_forward_and_backward(sweep: dict) -> None:
    assert sorted(sweep["table"]) == sorted(SLICE)
    assert sweep["summary"]["forward"]["cases"] > 300 and sweep["summary"]["backward"]["cases"] > 100


@pytest.mark.parametrize("mode", ["forward", "backward", "error"])
def test_slice_equal_to_the_cpu(sweep: dict, mode: str) -> None:
    bad = [f"{r['op']} {r['dtype']} #{r['sample']}: {r['code']} {r['detail'][:300]}" for r in sweep["not_equal"]
           if r["mode"] in (mode, "process") and r["code"] != "c"]
    assert not bad, "\n".join(bad[:20])
