"""`python -m cudashim.emulated.npu`: fetch the torch-npu wheel the simulated NPU reads (scripts/install)."""

from __future__ import annotations

import sys

from .site import fetch_wheel

wheel, why = fetch_wheel()
if wheel is None:
    sys.stderr.write(f"cudashim: the simulated Ascend NPU will not start: {why}\n")
    sys.exit(1)
print(wheel)
