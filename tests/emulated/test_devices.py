"""Device counts: CUDASHIM_CPU_DEVICES=0 means no CUDA at all, as a GPU-less CUDA machine has none
(on real CUDA the same check runs with CUDA_VISIBLE_DEVICES=""); N devices are N distinct devices."""

from __future__ import annotations

from emulated_run import REAL_CUDA, run_python

NO_DEVICE = """
import torch
assert not torch.cuda.is_available() and torch.cuda.device_count() == 0
try:
    torch.ones(1, device="cuda")
except (RuntimeError, AssertionError) as e:
    print("refused:", e)
else:
    raise SystemExit("a cuda tensor was made with no device")
"""

TWO_DEVICES = """
import torch
assert torch.cuda.device_count() >= 2
a = torch.ones(2, device="cuda:0")
b = a.to("cuda:1")
assert b.device == torch.device("cuda", 1) and b.tolist() == [1.0, 1.0]
with torch.cuda.device(1):
    assert torch.cuda.current_device() == 1 and torch.zeros(1, device="cuda").device.index == 1
assert torch.cuda.current_device() == 0
try:
    a + b
except RuntimeError as e:
    assert "same device" in str(e), e
else:
    raise SystemExit("cuda:0 + cuda:1 ran")
print("ok")
"""


def test_zero_devices_make_no_cuda_tensors() -> None:
    env = {"CUDA_VISIBLE_DEVICES": ""} if REAL_CUDA else {"CUDASHIM_CPU_DEVICES": "0"}
    proc = run_python(["-c", NO_DEVICE], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "refused:" in proc.stdout


def test_two_devices_are_distinct() -> None:
    import pytest

    if REAL_CUDA:
        pytest.skip("needs two GPUs on real CUDA; the emulated run covers it")
    proc = run_python(["-c", TWO_DEVICES], {"CUDASHIM_CPU_DEVICES": "2"})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
