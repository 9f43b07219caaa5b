"""The dtypes torch_npu's own kernels refuse are refused on the simulated NPU, in torch_npu's words.

Each case calls an operator on npu tensors with a dtype an op-plugin op_api kernel refuses with a
TORCH_CHECK (torch_npu 2.13.0 on a 910B; the file and line are named per case) and expects the
RuntimeError torch_npu raises: its message, then the line OPS_ERROR / PTA_ERROR appends
(formatErrorCode, torch_npu/csrc/core/npu/NPUException.cpp). The same operator with an allowed dtype
runs. The expected words are copied from op-plugin's source, not read from the simulator's table.
"""

from __future__ import annotations

import functools
import json
import re

import pytest

from _sim import need_wheel, run_readiness, run_sim

OPS_TYPE = "ERR01002 OPS invalid type"  # OPS_ERROR(ErrCode::TYPE)
PTA_NOT_SUPPORT = "ERR00007 PTA feature not supported"  # PTA_ERROR(ErrCode::NOT_SUPPORT)
TAIL = re.compile(r"^\[ERROR\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d \(PID:\d+, Device:0, RankID:-1\) (?P<code>.+)$")

SETUP = """
import json, torch, torch_npu
import torch.nn.functional as F
x64 = torch.tensor([3., 1., 2.], dtype=torch.float64).npu()
x32 = x64.float()
img64 = torch.arange(16, dtype=torch.float64).reshape(1, 1, 4, 4).npu()
m64 = torch.tensor([[2., 1.], [1., 3.]], dtype=torch.float64).npu()
idx = torch.tensor([0]).npu()
cvalue = torch.tensor(1 + 1j).npu()
"""

# id -> (the refused call, torch_npu's first line of the message, the code line it appends; its source)
REFUSED = {
    # SortKernelNpuOpApi.cpp:91 (op_api::sort with stable)
    "sort.stable": ("torch.sort(x64, stable=True)", "Input data type should not be float64 ", OPS_TYPE),
    # torch_npu's argsort.stable kernel calls at::sort(self, stable, dim, descending): the same check
    "argsort.stable": ("torch.argsort(x64, stable=True)", "Input data type should not be float64 ", OPS_TYPE),
    # SortKernelNpuOpApi.cpp:107 (op_api::sort_out with stable)
    "sort.values_stable": ("torch.sort(x64, stable=True, out=(torch.empty(3, dtype=torch.float64).npu(), "
                           "torch.empty(3, dtype=torch.long).npu()))", "Input data type should not be float64 ", OPS_TYPE),
    # UpsampleBilinear2dKernelNpuOpApi.cpp:56, reached through upsample_bilinear2d.vec
    "upsample_bilinear2d": ("F.interpolate(img64, scale_factor=2, mode='bilinear')",
                            "upsample_binlinear_2d not support torch.fp64 dtypes", OPS_TYPE),
    # UpsampleBilinear2dKernelNpuOpApi.cpp:34
    "upsample_bilinear2d.out": ("torch._C._nn.upsample_bilinear2d(img64, [8, 8], False, out=torch.empty(1, 1, 8, 8, "
                                "dtype=torch.float64).npu())", "upsample_binlinear_2d not support torch.fp64 dtypes", OPS_TYPE),
    # LinalgSvdKernelNpuOpApi.cpp:27: "svd_npu only supported Float, but get", A.dtype() (a TypeMeta: "double")
    "_linalg_svd": ("torch.linalg.svd(m64)", "svd_npu only supported Float, but getdouble", OPS_TYPE),
    # RoundDecimalsKernelNpuOpApi.cpp:24: floating, int32 and int64 only; toString(ScalarType)
    "round.decimals": ("torch.round(torch.tensor([1, 2], dtype=torch.int8).npu(), decimals=1)",
                       "\"round_npu\" not implemented for 'Char'", OPS_TYPE),
    "round.decimals_out": ("torch.round(torch.tensor([1, 2], dtype=torch.int16).npu(), decimals=1, "
                           "out=torch.empty(2, dtype=torch.int16).npu())", "\"round_npu\" not implemented for 'Short'", OPS_TYPE),
    "round_.decimals": ("torch.tensor([1, 2], dtype=torch.uint8).npu().round_(decimals=1)",
                        "\"round_npu\" not implemented for 'Byte'", OPS_TYPE),
    # NormalKernelNpuOpApi.cpp:33 (check_normal_tensor_std)
    "normal.Tensor_Tensor": ("torch.normal(x32, x32.to(torch.complex64))",
                             "normal expects standard deviation to be non-complex", OPS_TYPE),
    "normal.Tensor_Tensor_out": ("torch.normal(x32, x32.to(torch.complex64), out=torch.empty(3).npu())",
                                 "normal expects standard deviation to be non-complex", OPS_TYPE),
    "normal.float_Tensor": ("torch.normal(0.0, x32.to(torch.complex64))",
                            "normal expects standard deviation to be non-complex", OPS_TYPE),
    "normal.float_Tensor_out": ("torch.normal(0.0, x32.to(torch.complex64), out=torch.empty(3).npu())",
                                "normal expects standard deviation to be non-complex", OPS_TYPE),
    # IndexFillKernelNpuOpApi.cpp:44, :69, :96, :117
    "index_fill_.int_Tensor": ("x32.clone().index_fill_(0, idx, cvalue)",
                               "index_fill_(): Converting complex Scalar to non-complex type is not supported", PTA_NOT_SUPPORT),
    "index_fill.int_Tensor": ("x32.index_fill(0, idx, cvalue)",
                              "index_fill(): Converting complex Scalar to non-complex type is not supported", PTA_NOT_SUPPORT),
    "index_fill_.int_Scalar": ("x32.clone().index_fill_(0, idx, 1 + 1j)",
                               "index_fill_(): Converting complex Scalar to non-complex type is not supported", PTA_NOT_SUPPORT),
    "index_fill.int_Scalar": ("x32.index_fill(0, idx, 1 + 1j)",
                              "index_fill(): Converting complex Scalar to non-complex type is not supported", PTA_NOT_SUPPORT),
    # TanhKernelNpuOpApi.cpp:25: an integral out= refused
    "tanh.out": ("torch.tanh(x32, out=torch.empty(3, dtype=torch.long).npu())",
                 "result dtype can't be cast to the desired output type.", OPS_TYPE),
}

# id -> a call of the same operator (or its caller) with a dtype the kernel takes: it runs
ALLOWED = {
    "sort.stable": "torch.sort(x32, stable=True).values",
    "sort (no check in its kernel)": "torch.sort(x64).values",
    "argsort (no check in its kernel)": "torch.argsort(x64)",
    "sort.values (no check in its kernel)": "torch.sort(x64, out=(torch.empty(3, dtype=torch.float64).npu(), "
                                            "torch.empty(3, dtype=torch.long).npu())).values",
    "upsample_bilinear2d": "F.interpolate(img64.float(), scale_factor=2, mode='bilinear')",
    "_linalg_svd": "torch.linalg.svd(m64.float()).S",
    "round.decimals": "torch.round(x32 / 7, decimals=2)",
    "normal.Tensor_Tensor": "torch.normal(x32, x32)",
    "index_fill.int_Scalar (complex self)": "x32.to(torch.complex64).index_fill(0, idx, 1 + 1j)",
    "index_fill.int_Scalar (real value)": "x32.index_fill(0, idx, 5.0)",
    "tanh.out": "torch.tanh(x32, out=torch.empty(3).npu())",
}

PROGRAM = SETUP + f"""
out = {{"refused": {{}}, "allowed": {{}}}}
for name, code in {json.dumps({k: v[0] for k, v in REFUSED.items()})}.items():
    try:
        eval(code)
        out["refused"][name] = None
    except Exception as e:
        out["refused"][name] = [type(e).__name__, str(e)]
for name, code in {json.dumps(ALLOWED)}.items():
    try:
        out["allowed"][name] = ["ran", str(eval(code).dtype)]
    except Exception as e:
        out["allowed"][name] = [type(e).__name__, str(e).splitlines()[0]]
print(json.dumps(out))
"""


@functools.lru_cache(maxsize=1)
def _outcomes() -> dict:
    """PROGRAM's one run on the simulated NPU: every case reads its own part."""
    need_wheel()
    r = run_sim(["-c", PROGRAM])
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_torch_npus_dtype_check_refuses_the_call_in_its_words(case):
    _, first, code = REFUSED[case]
    got = _outcomes()["refused"][case]
    assert got is not None, f"{REFUSED[case][0]} ran; torch_npu refuses it"
    kind, message = got
    lines = message.splitlines()
    assert kind == "RuntimeError", message
    assert lines[0] == first, message
    tail = TAIL.match(lines[-1])
    assert tail and tail.group("code") == code, message


@pytest.mark.parametrize("case", sorted(ALLOWED))
def test_an_allowed_dtype_of_the_same_operator_runs(case):
    got = _outcomes()["allowed"][case]
    assert got[0] == "ran", got


def test_compact_error_output_drops_the_code_line():
    need_wheel()
    code = SETUP + "try:\n    torch.sort(x64, stable=True)\nexcept RuntimeError as e:\n    print(repr(str(e)))\n"
    r = run_sim(["-c", code], {"TORCH_NPU_COMPACT_ERROR_OUTPUT": "1"})
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.strip().splitlines()[-1] == repr("Input data type should not be float64 ")


def test_the_readiness_report_counts_a_refused_call_as_failing_with_its_source(tmp_path):
    program = SETUP + ("try:\n    torch.sort(x64, stable=True)\nexcept RuntimeError:\n    pass\n"
                       "print(torch.sort(x32, stable=True).values.cpu())\n")
    line = program.splitlines().index("    torch.sort(x64, stable=True)") + 1
    prog, r, ready = run_readiness(tmp_path, program)
    ops = {(o["op"], o["dtypes"]): o for o in ready["ops"]}
    refused, ran = ops[("aten::sort.stable", "float64")], ops[("aten::sort.stable", "float32")]
    assert refused["status"] == "fails" and refused["first_call_site"] == f"{prog}:{line}"
    assert refused["error"] == "RuntimeError: Input data type should not be float64 "
    assert refused["dtype_check"]["source"].endswith("op_plugin/ops/opapi/SortKernelNpuOpApi.cpp:91")
    assert ran["status"] == "native" and ran["dtype_check"] is None
    summary = [line for line in r.stderr.splitlines() if line.startswith("cudashim ascend readiness")]
    assert len(summary) == 1 and "1 fail;" in summary[0]
    assert f"aten::sort.stable [float64] fails x1 at {prog}:{line}" in summary[0]
