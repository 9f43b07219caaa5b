"""Device counts: CUDASHIM_CPU_DEVICES=0 means no CUDA at all, as a GPU-less CUDA machine has none
(on real CUDA the same check runs with CUDA_VISIBLE_DEVICES=""); N devices are N distinct devices,
each with its own memory cache (of blocks over 128 KiB); PYTORCH_NO_CUDA_MEMORY_CACHING=1 turns the cache
off, as on a GPU."""

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
r0, r1, a1 = torch.cuda.memory_reserved(0), torch.cuda.memory_reserved(1), torch.cuda.memory_allocated(1)
c = torch.empty(2**20, device="cuda:1")
del c  # its block stays with cuda:1
assert torch.cuda.memory_reserved(1) - r1 >= 4 * 2**20 and torch.cuda.memory_reserved(0) == r0
assert torch.cuda.memory_allocated(1) == a1
print("ok")
"""

# On the H200 (torch 2.11+cu130) caching off bypasses the allocator's statistics: they all read 0.
# The device keeps counting; both give a freed block back at once.
NO_CACHING = """
import sys, torch
torch.cuda.synchronize()
r0 = torch.cuda.memory_reserved()
x = torch.empty(16 * 2**20 // 4, device="cuda")
y = x + 1
live = torch.cuda.memory_reserved()
assert live == 0 if "--real" in sys.argv else live >= r0 + 2 * 16 * 2**20, (r0, live)
del x, y
assert torch.cuda.memory_reserved() == r0, (r0, torch.cuda.memory_reserved())
print("ok")
"""


# The device caches only blocks over 128 KiB: the host's malloc keeps smaller ones warmer than a
# cache of size classes could (csrc/runtime/allocator.cpp). A GPU keeps both reserved.
SMALL_NOT_CACHED = """
import torch
torch.cuda.empty_cache()
r0 = torch.cuda.memory_reserved()
small = torch.empty(2**17 // 4, device="cuda")  # 128 KiB
assert torch.cuda.memory_reserved() == r0 + 2**17, (r0, torch.cuda.memory_reserved())
del small
assert torch.cuda.memory_reserved() == r0, "a freed block of 128 KiB stayed reserved"
large = torch.empty(2**17 // 4 + 128, device="cuda")  # 128 KiB + 512 bytes
del large
assert torch.cuda.memory_reserved() > r0, "a freed block over 128 KiB left the reserved memory"
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


def test_memory_caching_turned_off() -> None:
    proc = run_python(["-c", NO_CACHING] + (["--real"] if REAL_CUDA else []), {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "ok" in proc.stdout


def test_only_blocks_over_128_kib_are_cached() -> None:
    import pytest

    if REAL_CUDA:
        pytest.skip("the emulated device's choice: CUDA's allocator keeps small blocks reserved too")
    proc = run_python(["-c", SMALL_NOT_CACHED], {})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "ok" in proc.stdout


# Dynamo fetches the current stream before every call of a compiled frame once it registered it; the
# device registers it only for traces that ask for it (cudashim/emulated/compile.py). Such a trace
# still gets the current stream; the others run no per-call lookup.
STREAM_LOOKUPS = r"""
import torch, torch._dynamo.utils as utils
calls = []
fetch = utils.get_current_stream
utils.get_current_stream = lambda device: calls.append(device) or fetch(device)

@torch.compile
def norm(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

@torch.compile(fullgraph=True)
def with_stream(x):
    return x * 2, torch.cuda.current_stream()

x = torch.randn(4, 8, device="cuda")
for _ in range(3):
    norm(x)
plain = len(calls)
for _ in range(3):
    y, s = with_stream(x)
print(plain, len(calls) > plain, s == torch.cuda.current_stream(), y.device)
"""


def test_compiled_frames_fetch_the_current_stream_only_where_used() -> None:
    import pytest

    if REAL_CUDA:
        pytest.skip("the device's own choice: on CUDA Dynamo's per-call lookup is torch's")
    proc = run_python(["-c", STREAM_LOOKUPS], {})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["0", "True", "True", "cuda:0"]
