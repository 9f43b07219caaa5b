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
print("stream synchronize:", _capture_fails(lambda: torch.cuda.current_stream().synchronize()))
print("stream query:", _capture_fails(lambda: torch.cuda.current_stream().query()))


def _event(method: str) -> None:
    e = torch.cuda.Event()
    e.record()
    getattr(e, method)()


print("event synchronize:", _capture_fails(lambda: _event("synchronize")))
print("event query:", _capture_fails(lambda: _event("query")))
side = torch.cuda.Stream()


def _unjoined() -> None:
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.mul_(3)


print("unjoined side stream:", _capture_fails(_unjoined))
