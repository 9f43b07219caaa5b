"""The emulated device on either build of torch (cudashim/_torch_compat.py, csrc/ops/torch_cuda.cpp).

On a CUDA build without a GPU (PyPI's torch on a CI runner), torch's CUDA backend registered hooks, a
guard, an allocator, generators and ~1800 kernels for the CUDA key before the shim loads; the device's
take their place: every kernel torch's backend registered is the device's (its fallback or the composite
a CPU build runs there), also where a Python override of torch's own (torch._native's routers, which
call the CUDA kernel beneath them) lies on top; the hooks are the device's, and programs see the device.
torch.cuda.jiterator (NVRTC) is refused with the platform's error on both builds. On a CPU build nothing
of torch's is replaced. The same file runs on both builds (CI's CPU build, `scripts/test --matrix`'s
CUDA builds); each asserts what its build must show.
"""

from __future__ import annotations

import json

import pytest
from emulated_run import REAL_CUDA, run_python

pytestmark = pytest.mark.skipif(REAL_CUDA, reason="the emulated device, not a GPU")

CHILD = """
import json, re, torch
from cudashim import _torch_compat, emulated
core = emulated.core()
def active_file(op, key="CUDA"):
    line = next(l for l in torch._C._dispatch_dump(op).splitlines() if l.startswith(key + ": registered at "))
    return re.match(r".*? registered at (.*?):\\d+", line).group(1)
x = torch.randn(16, 16, device="cuda")
g = torch.Generator(device="cuda").manual_seed(3)
out = {
    "cuda_build": _torch_compat.cuda_build(torch),
    "replaced": core.torch_cuda_kernels_replaced(),
    # an operator only CUDA has a kernel for in a CUDA build, and the device's own kernel for another
    "cudnn_flatten": active_file("aten::_cudnn_rnn_flatten_weight") if torch._C._dispatch_has_kernel_for_dispatch_key(
        "aten::_cudnn_rnn_flatten_weight", "CUDA") else None,
    "empty_strided": active_file("aten::empty_strided"),
    "mm_equal": torch.equal((x @ x).cpu(), x.cpu() @ x.cpu()),
    "generator": torch.rand(4, device="cuda", generator=g).device.type,
    "accelerator": str(torch.accelerator.current_accelerator()),
    "cudnn_available": torch.backends.cudnn.is_available(),
    "allocated": torch.cuda.memory_allocated() > 0,
}
print("RESULT", json.dumps(out))
"""


def test_device_owns_the_cuda_key_on_either_build() -> None:
    proc = run_python(["-c", CHILD], timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))[len("RESULT "):])
    assert out["mm_equal"] and out["generator"] == "cuda" and out["accelerator"] == "cuda" and out["allocated"]
    assert out["empty_strided"].endswith("kernels.cpp")  # the device's own allocation kernel on both builds
    assert out["cudnn_available"] is False  # as a CPU build answers: the device has no cuDNN
    # an operator only CUDA runs gets the device's kernel or refusal (emulated/cuda_only.py) on either build,
    # never torch's CUDA kernel nor the fallback torch_cuda.cpp stood in its place
    assert out["cudnn_flatten"] is not None and out["cudnn_flatten"].endswith("cuda_only.py")
    if out["cuda_build"]:
        assert out["replaced"] > 1000
    else:
        assert out["replaced"] == 0


TAKEOVER = """
import json, re, torch
from cudashim import emulated
emulated.core()
KEYS = ("CUDA", "SparseCUDA", "SparseCsrCUDA", "QuantizedCUDA", "NestedTensorCUDA")
line = re.compile(r"^(\\w+)( \\(inactive\\))?: registered at (.*?):\\d+", re.M)
def every_build(f):  # what a CPU build registers for these keys too
    return f.endswith(".py") or f.endswith("/c10d/Ops.cpp")
def devices(f):  # the device's own kernels: the native core's sources, the package's Python
    return "/cudashim/" in f or ("/torch/csrc/" not in f and re.search(r"/csrc/\\w+/\\w+\\.cpp$", f) is not None)
left = []
for name in torch._C._dispatch_get_all_op_names():
    dump = torch._C._dispatch_dump(name)
    for key in KEYS:
        files = [(m.group(2) is None, m.group(3)) for m in line.finditer(dump) if m.group(1) == key]
        if not any(not every_build(f) and not devices(f) for _, f in files):
            continue  # no kernel of torch's CUDA backend in this slot
        active = next(f for on, f in files if on)
        if not devices(active):
            left.append(f"{name}/{key}: {active}")
print("RESULT", json.dumps({"cuda_build": hasattr(torch._C, "_cuda_getDeviceCount"), "left": left}))
"""


def test_no_kernel_of_torchs_cuda_backend_stays_active() -> None:
    # every slot where torch's CUDA backend registered a kernel runs the device's kernel, whether torch's
    # lies at the top or under a Python override (torch._native's routers, which fall back to it)
    proc = run_python(["-c", TAKEOVER], timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))[len("RESULT "):])
    assert out["left"] == [], f"{len(out['left'])} slots keep torch's CUDA kernel: {out['left'][:20]}"


JITERATOR = """
import torch
from cudashim.errors import CapabilityError
f = torch.cuda.jiterator._create_jit_fn("template <typename T> T add(T x, T y) { return x + y; }")
try:
    f(torch.ones(3, device="cuda"), torch.ones(3, device="cuda"))
except CapabilityError as e:
    print("REFUSED", e)
"""


def test_jiterator_is_refused_with_the_way_out_on_either_build() -> None:
    # NVRTC compiles the program's CUDA C++ for a GPU: a CPU build has no entry point for it, a CUDA
    # build's asks a driver that is not there; neither is the platform's error naming the feature
    proc = run_python(["-c", JITERATOR], timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    said = next(l for l in proc.stdout.splitlines() if l.startswith("REFUSED"))
    assert "torch.cuda.jiterator" in said and "torch operators" in said



LCE = """
import json, torch, torch.nn.functional as F
mm, seen = torch.mm, []
def recording_mm(*args, **kwargs):  # what torch's chunked path asks of the matrix product
    seen.append("out_dtype" if kwargs.get("out_dtype") is not None else "plain")
    return mm(*args, **kwargs)
torch.mm = recording_mm
torch.manual_seed(0)
x, w = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(40, 16, dtype=torch.bfloat16)
t = torch.randint(0, 40, (8,))
out = {}
for dev in ("cpu", "cuda"):
    seen.clear()
    xl, wl = x.to(dev).requires_grad_(), w.to(dev).requires_grad_()
    loss = F.linear_cross_entropy(xl, wl, t.to(dev), options=torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2))
    torch.autograd.grad(loss, (xl, wl))
    out[dev] = sorted(set(seen))
print("RESULT", json.dumps(out))
"""


@pytest.mark.skipif(not hasattr(__import__("torch").nn, "LinearCrossEntropyOptions"), reason="no chunked path")
def test_chunked_linear_cross_entropy_takes_cudas_path() -> None:
    # torch's chunked linear_cross_entropy branches on device.type == "cuda" (its acc_policy default, and
    # cuBLAS's out_dtype products, aten::mm.dtype, instead of upcast copies): the device takes CUDA's branch,
    # so in bf16/fp16 it differs from the CPU oracle as CUDA does (opdb_cases.DEVICE_TYPE_PATHS says so)
    proc = run_python(["-c", LCE], timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))[len("RESULT "):])
    assert "out_dtype" in out["cuda"] and "out_dtype" not in out["cpu"], out


STUB_CALLERS = """
import torch
x, e = torch.randn(5, dtype=torch.bfloat16), torch.randint(-3, 4, (5,), dtype=torch.int32)
got = torch.ldexp(x.cuda(), e.cuda())  # its composite calls ldexp_stub, keyed by device type, for int exponents
assert got.device.type == "cuda" and torch.equal(got.cpu(), torch.ldexp(x, e)), (got, torch.ldexp(x, e))
print("EQUAL")
"""


def test_composites_that_call_a_stub_reach_the_cpus_kernel() -> None:
    # a DispatchStub picks its kernel by the tensors' device type, under no dispatch key: on a CUDA build
    # a composite that calls one reaches torch's CUDA kernel unless its CUDA slot is the device's
    proc = run_python(["-c", STUB_CALLERS], timeout=300)
    assert proc.returncode == 0 and "EQUAL" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
