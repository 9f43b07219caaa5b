"""torch_npu's operator table on the simulated NPU: operators outside it take torch_npu's CPU fallback,
with its warning (once per operator), its refusal under TORCH_NPU_FALLBACK_CPU_DISABLE=1, and its
failures (no CPU kernel; a sparse operator torch_npu registers no kernel for). The expected words are torch_npu's own
(torch_npu/csrc/aten/VariableFallbackKernel.cpp, framework/utils/CpuFallbackUtils.h)."""

from __future__ import annotations

import functools
import json
import re

from _sim import need_wheel, run_sim

# the line c10's base warning handler writes for torch_npu's TORCH_NPU_WARN in npu_cpu_fallback
WARNED = re.compile(r"^\[W\d{4} [\d:.]+(?: \d+)? VariableFallbackKernel\.cpp:\d+\] Warning: CAUTION: The operator "
                    r"'aten::(?P<op>[\w.]+)' is not currently supported on the NPU backend and will fall back to run "
                    r"on the CPU\. This may have performance implications\. \(function npu_cpu_fallback\)$")

PROGRAM = r"""
import json, sys, torch, torch_npu
from cudashim.emulated.npu import device
x = torch.tensor([[1., 2., 2., 3.], [4., 4., 5., 5.]])
y = x.npu()
first = torch.mode(y, dim=1)                 # aten::mode: a CPU kernel, no NPU kernel in torch_npu 2.13.0
again = torch.mode(y * 1, dim=1)
native = (y @ y.T + y.sum()).cpu()           # mm, add, sum: NPU kernels
sys.stderr.flush()
out = {"mode": [first.values.cpu().tolist(), again.indices.cpu().tolist()],
       "cpu_mode": [torch.mode(x, dim=1).values.tolist(), torch.mode(x, dim=1).indices.tolist()],
       "native": native.tolist(), "counts": device.core().npu_fallback_counts()}
q = torch.randn(1, 1, 4, 8, device="npu")
try:
    torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False)
except Exception as e:
    out["efficient"] = [type(e).__name__, str(e).splitlines()[0]]
s = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1., 2.]), (2, 2), device="npu")
out["sparse_sum"] = torch.sparse.sum(s).item()  # torch_npu registers a sparse kernel for sum
try:
    torch.sparse.softmax(s, 0)  # and none for _sparse_softmax
except Exception as e:
    out["sparse"] = [type(e).__name__, str(e).splitlines()[0]]
print(json.dumps(out))
"""


def _run(extra: dict[str, str] | None = None):
    need_wheel()
    r = run_sim(["-c", PROGRAM], extra)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr.splitlines()


@functools.lru_cache(maxsize=1)
def _plain() -> tuple[dict, list[str]]:
    """PROGRAM's one run without extra settings: three tests read it (each reads its own part)."""
    return _run()


def test_an_operator_outside_the_table_warns_once_in_torch_npus_words_and_runs_on_the_cpu():
    got, err = _plain()
    warned = [m.group("op") for m in map(WARNED.match, err) if m]
    assert warned.count("mode") == 1, err  # twice called, once warned
    assert not {"mm", "add.Tensor", "sum"} & set(warned)
    assert got["mode"] == got["cpu_mode"]
    assert got["counts"]["aten::mode"] == 2
    assert "aten::mm" not in got["counts"]


def test_no_cpu_kernel_fails_as_the_npus_fallback_does():
    got, err = _plain()
    assert any((m := WARNED.match(line)) and m.group("op") == "_scaled_dot_product_efficient_attention" for line in err)
    kind, msg = got["efficient"]
    assert kind == "NotImplementedError"
    assert "Could not run 'aten::_scaled_dot_product_efficient_attention' with arguments from the 'CPU' backend" in msg


def test_sparse_npu_tensors_run_torch_npus_kernels_and_raise_its_error_elsewhere():
    got, _ = _plain()
    assert got["sparse_sum"] == 3.0
    assert got["sparse"] == ["RuntimeError", "CAUTION: The operator 'aten::_sparse_softmax' "
                                             "is not currently supported on the NPU backend."]


def test_torch_npu_fallback_cpu_disable_refuses_the_fallback():
    need_wheel()
    code = ("import torch, torch_npu\ny = torch.ones(3, device='npu')\nprint((y + 1).sum().item())\n"
            "try:\n    torch.mode(y)\nexcept RuntimeError as e:\n    print('REFUSED', str(e).splitlines()[0])\n")
    r = run_sim(["-c", code], {"TORCH_NPU_FALLBACK_CPU_DISABLE": "1"})
    assert r.returncode == 0, r.stderr[-4000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-2] == "6.0"  # NPU kernels run as before
    assert lines[-1] == ("REFUSED The operator 'aten::mode' would execute its main computation on CPU through dispatcher "
                         "backend fallback because no kernel is registered for the NPU PrivateUse1 backend, but CPU "
                         "fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1.")
    assert not any(WARNED.match(line) for line in r.stderr.splitlines())


def test_torch_npu_warning_disable_silences_the_warning_not_the_fallback():
    got, err = _run({"TORCH_NPU_WARNING_DISABLE": "1"})
    assert not any(WARNED.match(line) for line in err)
    assert got["mode"] == got["cpu_mode"] and got["counts"]["aten::mode"] == 2
