"""Run on the simulated NPU (cudashim run --platform ascend --simulate): triton-ascend's refusals and warning
end to end, its language names, and Liger-Kernel's NPU branch against torch references. One JSON line at the
end: case -> ["ok", detail] or [exception type, message]."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _kernels as K  # noqa: E402

out: dict[str, list] = {}


def case(name: str, fn) -> None:
    try:
        out[name] = ["ok", fn()]
    except BaseException as e:  # noqa: BLE001
        out[name] = [type(e).__name__, str(e)[:600]]


x = torch.rand(70_000, device="cuda")


def grid():
    K.add_kernel[(70_000,)](x, x, torch.empty_like(x), 70_000, BLOCK=1)


def libdevice_erfc():
    K.erfc_kernel[(1,)](x, torch.empty_like(x), 64, BLOCK=64)


def cast_fp64():
    K.cast_fp64_kernel[(1,)](x, torch.empty(64, device="cuda", dtype=torch.float64), 64, BLOCK=64)


def dot_fp64():
    a = torch.rand(256, device="cuda", dtype=torch.float64)
    K.dot_kernel[(1,)](a, torch.empty_like(a), BLOCK=16)


def wide_rows():
    y = torch.empty(32_768, device="cuda")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        K.wide_row_kernel[(1,)](x, y, BLOCK=32_768)
    return {"warnings": [f"{type(m.message).__name__}: {m.message}" for m in w if "Unified Buffer" in str(m.message)],
            "equal": bool(torch.equal(y, x[:32_768] * 3))}


try:  # an NPU-aware library's import: triton-ascend's name (its testing.py:826), absent from upstream Triton
    from triton.language.math import tanh
except ImportError as e:
    tanh_missing = e
else:
    tanh_missing = None

    @triton.jit
    def tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tanh(tl.load(x_ptr + o, mask=o < n)), mask=o < n)


def tanh_surface():
    if tanh_missing is not None:
        raise tanh_missing
    y = torch.empty(1024, device="cuda")
    tanh_kernel[(1,)](x, y, 1024, BLOCK=1024)
    return float((y - torch.tanh(x[:1024])).abs().max())


def liger_npu_branch():
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.utils import is_npu_available

    torch.manual_seed(0)
    errs = {"npu_detected": is_npu_available()}
    for dt in (torch.float32, torch.bfloat16):
        xs = torch.randn(4, 512, device="cuda", dtype=dt, requires_grad=True)
        w = torch.randn(512, device="cuda", dtype=dt, requires_grad=True)
        y = LigerRMSNormFunction.apply(xs, w, 1e-6)
        y.float().sum().backward()
        gx, gw = xs.grad.float(), w.grad.float()
        xr, wr = xs.detach().float().requires_grad_(), w.detach().float().requires_grad_()
        ref = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr
        ref.sum().backward()
        errs[f"rms_norm_{dt}"] = [float((y.float() - ref).abs().max()), float((gx - xr.grad).abs().max()),
                                 float((gw - wr.grad).abs().max())]
    a, b = torch.randn(8, 512, device="cuda"), torch.randn(8, 512, device="cuda")
    g = LigerGELUMulFunction.apply(a, b)
    errs["geglu"] = float((g - torch.nn.functional.gelu(a, approximate="tanh") * b).abs().max())
    return errs


def npu_properties():
    # what triton-ascend's driver answers (its backends/ascend/driver.py:80-86), read by NPU-aware libraries
    props = triton.runtime.driver.active.utils.get_device_properties(0)
    return {k: props[k] for k in ("num_aicore", "num_vectorcore", "multiprocessor_count")}


def liger_ascend_backend():
    # Liger's own Ascend kernels import a module of a later triton-ascend than 3.2.0
    import liger_kernel.ops.backends._ascend.ops  # noqa: F401


for name, fn in (("grid", grid), ("libdevice_erfc", libdevice_erfc), ("cast_fp64", cast_fp64), ("dot_fp64", dot_fp64),
                 ("wide_rows", wide_rows), ("tanh_surface", tanh_surface), ("liger_npu_branch", liger_npu_branch),
                 ("npu_properties", npu_properties), ("liger_ascend_backend", liger_ascend_backend)):
    if len(sys.argv) < 2 or name in sys.argv[1:]:
        case(name, fn)
print(json.dumps(out))
