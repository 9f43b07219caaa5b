"""Operators the core implements itself take torch_npu's decision too: on the simulated NPU an operator
torch_npu 2.13.0 has no NPU kernel for warns, is counted and is refused under
TORCH_NPU_FALLBACK_CPU_DISABLE=1 (or runs its composite) whichever of the core's paths serves it: the
table of operators CUDA synchronizes on (cudashim/emulated/synchronizing.json), the core's typed kernels
(linalg_eig), its unboxed hot-path kernels (csrc/ops/direct.cpp) and the CUDA-only predicates. Which
operators lack an NPU kernel is read from torch_npu_ops.json by name here only to pick the cases; the
expected words are torch_npu's (torch_npu/csrc/aten/VariableFallbackKernel.cpp)."""

from __future__ import annotations

import functools
import json

import pytest

from _sim import need_wheel, run_sim
from test_coverage import WARNED

# operator -> the call that reaches it on npu tensors (names from SETUP); each has a CPU kernel and no
# NPU kernel (nor a composite one) in torch_npu 2.13.0
FALLBACK = {
    # the synchronizing table
    "linalg_matrix_exp": "torch.linalg.matrix_exp(sq)",
    "unique_dim_consecutive": "torch.ops.aten.unique_dim_consecutive(rows, 0)",
    "_ctc_loss.Tensor": "torch.ops.aten._ctc_loss.Tensor(lp, tg, il, tl, 0, False)",
    "_ctc_loss_backward.Tensor": "torch.ops.aten._ctc_loss_backward.Tensor(torch.ones(1).npu(), lp, tg, il, tl, nll, "
                                 "alpha, 0, False)",
    # a typed kernel of the core (csrc/ops/linalg.cpp)
    "linalg_eig": "torch.linalg.eig(sq)",
}

SETUP = """
import json, sys, torch, torch_npu
from cudashim.emulated.npu import device
sq = (torch.eye(3) * 0.5 + torch.tensor([[0., 1., 0.], [0., 0., 1.], [1., 0., 0.]]) * 0.25).npu()
rows = torch.tensor([[1, 2], [1, 2], [3, 4], [3, 4], [1, 2]]).npu()
lp = torch.randn(5, 1, 4).log_softmax(2).npu()
tg, il, tl = torch.tensor([[1, 2]]).npu(), torch.tensor([5]).npu(), torch.tensor([2]).npu()
nll, alpha = (r.npu() for r in torch.ops.aten._ctc_loss.Tensor(lp.cpu(), tg.cpu(), il.cpu(), tl.cpu(), 0, False))
out = {}
def attempt(name, code):
    try:
        exec(code, globals())
        out[name] = "ran"
    except Exception as e:
        out[name] = [type(e).__name__, str(e).splitlines()[0]]
"""


def _program(calls: dict[str, str], tail: str = "") -> str:
    lines = [SETUP] + [f"attempt({name!r}, {code!r})" for name, code in calls.items()]
    return "\n".join(lines) + tail + "\nsys.stderr.flush()\nout['counts'] = device.core().npu_fallback_counts()\nprint(json.dumps(out))\n"


def _run(program: str, extra: dict[str, str] | None = None) -> tuple[dict, list[str]]:
    need_wheel()
    r = run_sim(["-c", program], extra)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr.splitlines()


CHECKS = """
a = torch.linalg.matrix_exp(sq).cpu(); b = torch.linalg.matrix_exp(sq.cpu())
out['matrix_exp_equal'] = bool(torch.equal(a, b))
out["unique"] = torch.ops.aten.unique_dim_consecutive(rows, 0)[0].cpu().tolist()
torch.linalg.matrix_exp(sq)
"""


@functools.lru_cache(maxsize=1)
def _plain() -> tuple[dict, list[str]]:
    composite = {"lstsq": "torch.linalg.lstsq(sq, sq)", "cudnn_ctc": "torch._use_cudnn_ctc_loss(lp, tg, [5], [2], 0)"}
    return _run(_program({**FALLBACK, **composite}, CHECKS))


@pytest.mark.parametrize("op", sorted(FALLBACK))
def test_a_core_kernel_without_an_npu_kernel_warns_once_and_is_counted(op):
    got, err = _plain()
    assert got[op] == "ran"
    warned = [m.group("op") for m in map(WARNED.match, err) if m]
    assert warned.count(op) == 1, err
    assert got["counts"][f"aten::{op}"] >= 1


def test_the_fallback_computes_the_cpus_result():
    got, _ = _plain()
    assert got["matrix_exp_equal"] is True
    assert got["unique"] == [[1, 2], [3, 4], [1, 2]]
    assert got["counts"]["aten::linalg_matrix_exp"] == 3  # every call counted, one warning


def test_a_synchronizing_composite_runs_its_parts_which_decide_for_themselves():
    # linalg_lstsq has no NPU kernel but a composite one: on the NPU its parts are dispatched, and its
    # out= kernel, without an NPU kernel either, falls back (the operator itself is never named)
    got, err = _plain()
    warned = [m.group("op") for m in map(WARNED.match, err) if m]
    assert got["lstsq"] == "ran"
    assert "linalg_lstsq" not in warned and "aten::linalg_lstsq" not in got["counts"]
    assert "linalg_lstsq.out" in warned


def test_cuda_only_predicates_fail_as_torch_npus_fallback_does():
    got, err = _plain()
    assert any((m := WARNED.match(line)) and m.group("op") == "_use_cudnn_ctc_loss" for line in err)
    kind, msg = got["cudnn_ctc"]
    assert kind == "NotImplementedError"
    assert "Could not run 'aten::_use_cudnn_ctc_loss' with arguments from the 'CPU' backend" in msg


@functools.lru_cache(maxsize=1)
def _disabled() -> tuple[dict, list[str]]:
    return _run(_program(FALLBACK), {"TORCH_NPU_FALLBACK_CPU_DISABLE": "1"})


@pytest.mark.parametrize("op", sorted(FALLBACK))
def test_torch_npu_fallback_cpu_disable_refuses_a_core_kernel_without_an_npu_kernel(op):
    got, err = _disabled()
    assert got[op] == ["RuntimeError", f"The operator 'aten::{op}' would execute its main computation on CPU through "
                       "dispatcher backend fallback because no kernel is registered for the NPU PrivateUse1 backend, "
                       "but CPU fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1."]
    assert not any(WARNED.match(line) for line in err)


# The hot-path kernels (direct.cpp) serve only operators torch_npu 2.13.0 has kernels for, or composites
# whose parts it has; a table without some of them (as an older torch_npu's) must reach them too.
DIRECT = r"""
import json, sys, torch, torch_npu
from cudashim.emulated.npu import coverage, device
t = coverage.table()
drop = {"masked_fill_.Scalar", "argmax.out", "fill_.Scalar"}
device.core().set_npu_native(sorted(set(t["ops"]) - drop) + list(coverage.SIMULATOR_OPS) + list(coverage.STAND_INS),
                             sorted(t["sparse"]))
y = torch.arange(6.).reshape(2, 3).npu()
mask = torch.tensor([[True, False, True], [False, False, True]]).npu()
res = {"masked": y.clone().masked_fill_(mask, -1.0).cpu().tolist(), "argmax": torch.argmax(y, dim=1).cpu().tolist(),
       "scalar": torch.scalar_tensor(2.5, device="npu").item()}
y.clone().masked_fill_(mask, 0.5)
sys.stderr.flush()
res["counts"] = device.core().npu_fallback_counts()
print(json.dumps(res))
"""


def test_the_direct_kernels_and_typed_composites_follow_the_table():
    got, err = _run(DIRECT)
    warned = [m.group("op") for m in map(WARNED.match, err) if m]
    assert got["masked"] == [[-1.0, 1.0, -1.0], [3.0, 4.0, -1.0]] and got["argmax"] == [2, 2] and got["scalar"] == 2.5
    assert warned.count("masked_fill_.Scalar") == 1 and got["counts"]["aten::masked_fill_.Scalar"] == 2
    # argmax and scalar_tensor have no NPU kernel: their composites run, whose parts are now missing
    assert "argmax.out" in warned and "argmax" not in warned
    assert "fill_.Scalar" in warned and "scalar_tensor" not in warned


def test_round_with_decimals_zero_of_int64_is_the_npus_copy():
    # aclnnRoundDecimals runs int64 on the AI CPU kernel, whose integer branch for decimals=0 copies its
    # input (CANN ops-math math/round/op_kernel_aicpu/round_aicpu.cpp, RangeRound); the CPU has no kernel
    code = ("import json, torch, torch_npu\nx = torch.tensor([-3, 0, 7, 2**40], dtype=torch.int64)\n"
            "o = torch.empty(4, dtype=torch.int64).npu()\ny = x.npu()\n"
            "r = [torch.round(y, decimals=0).cpu().tolist(), torch.round(y, decimals=0, out=o).cpu().tolist(),"
            " y.clone().round_(decimals=0).cpu().tolist()]\nprint(json.dumps(r))\n")
    got, _ = _run(code)
    assert got == [[-3, 0, 7, 2**40]] * 3
