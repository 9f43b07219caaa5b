"""The aten operators only CUDA implements (scripts/cuda_only_ops.py lists them from native_functions.yaml):
on the emulated device each has a kernel or a CapabilityError that names it and the way out, never the
CPU's "Could not run ... with arguments from the 'CPU' backend". The list and its table in
docs/cuda-only-operators.md are current."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from emulated_run import REAL_CUDA, ROOT, run_python


def test_list_and_doc_are_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "cuda_only_ops.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


_PROBE = """
import json, torch
from cudashim.emulated import cuda_only
rows = {}
for row in cuda_only.listed():
    op = row["op"]
    name, _, overload = op.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or (overload or "default") not in packet.overloads():
        continue
    rows[op] = torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + op, "CUDA")
x = torch.randn(2, 3, device="cuda")
said = {}
for label, call in {
    "_fused_dropout": lambda: torch.ops.aten._fused_dropout(x, 0.5),
    "_cudnn_rnn_flatten_weight": lambda: torch.ops.aten._cudnn_rnn_flatten_weight([x], 1, 3, 1, 3, 0, 1, False, False),
    "batch_norm_stats": lambda: torch.ops.aten.batch_norm_stats(x, 1e-5),
    "_efficient_attention_forward dropout": lambda: torch.ops.aten._efficient_attention_forward(
        x.view(1, 2, 1, 3), x.view(1, 2, 1, 3), x.view(1, 2, 1, 3), None, None, None, None, None, 0.5, 0),
}.items():
    try:
        call()
        said[label] = "ran"
    except Exception as e:
        said[label] = type(e).__name__ + ": " + str(e)
print(json.dumps({"kernels": rows, "said": said}))
"""


@pytest.mark.skipif(REAL_CUDA, reason="the device's answers (CUDA has these kernels)")
def test_every_listed_operator_has_a_device_kernel_or_names_its_refusal() -> None:
    proc = run_python(["-c", _PROBE])
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    missing = [op for op, has in got["kernels"].items() if not has]
    assert len(got["kernels"]) > 80 and not missing, missing
    for label, said in got["said"].items():
        op = label.split()[0]
        assert said.startswith("CapabilityError") and f"aten::{op}" in said, (label, said)
        assert "'CPU' backend" not in said, (label, said)  # never the CPU's words


_RMS_NORM = """
import json, torch, torch.nn.functional as F
torch.manual_seed(0)
out = {}
for dt in (torch.float32, torch.bfloat16):
    x, w, g = torch.randn(4, 8, dtype=dt), torch.randn(8, dtype=dt), torch.randn(4, 8, dtype=dt)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = torch.autograd.grad(F.rms_norm(xc, (8,), wc, 1e-6), (xc, wc), g)  # the CPU's composite's gradient
    _, rstd = torch.ops.aten._fused_rms_norm(x.cuda(), [8], w.cuda(), 1e-6)
    got = torch.ops.aten._fused_rms_norm_backward(g.cuda(), x.cuda(), [8], rstd, w.cuda(), [True, True])
    torch.testing.assert_close([t.cpu() for t in got], list(ref))
    only_input = torch.ops.aten._fused_rms_norm_backward(g.cuda(), x.cuda(), [8], rstd, w.cuda(), [True, False])
    out[str(dt)] = [got[0].device.type, only_input[1] is None]
print(json.dumps(out))
"""


@pytest.mark.skipif(REAL_CUDA, reason="the device's kernel (CUDA has its own)")
def test_fused_rms_norm_backward_gives_the_composites_gradients() -> None:
    # torch 2.15's F.rms_norm sends a cuda tensor through aten::_fused_rms_norm, whose autograd formula
    # calls this CUDA-only operator: without a kernel every program training with F.rms_norm stops there
    proc = run_python(["-c", _RMS_NORM])
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"torch.float32": ["cuda", True], "torch.bfloat16": ["cuda", True]}
