"""Print the error text CUDA gives for each capture error graph_checks.py asserts on (run once on a GPU
to compare with the emulated device's; not a test)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from graph_checks import _capture_fails, _chain  # noqa: E402

x = torch.ones(3, device="cuda")
print("item:", _capture_fails(lambda: x.sum().item()))
print("synchronize:", _capture_fails(torch.cuda.synchronize))
print("pageable non_blocking:", _capture_fails(lambda: x.copy_(torch.ones(3), non_blocking=True)))
print("pinned blocking:", _capture_fails(lambda: x.copy_(torch.ones(3).pin_memory())))
print("nonzero:", _capture_fails(lambda: x.nonzero()))
gen = torch.Generator(device="cuda")
try:
    print("unregistered generator:", _capture_fails(lambda: torch.rand(3, device="cuda", generator=gen)))
except AssertionError as e:
    print("unregistered generator: no error", e)
g = torch.cuda.CUDAGraph()
try:
    g.replay()
except RuntimeError as e:
    print("replay before capture:", _chain(e))
