"""The emulated device on either build of torch (cudashim/_torch_compat.py, csrc/ops/torch_cuda.cpp).

On a CUDA build without a GPU (PyPI's torch on a CI runner), torch's CUDA backend registered hooks, a
guard, an allocator, generators and ~1800 kernels for the CUDA key before the shim loads; the device's
take their place: every kernel torch's backend registered is the device's (its fallback or the composite
a CPU build runs there), the hooks are the device's, and programs see the device. On a CPU build nothing
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
