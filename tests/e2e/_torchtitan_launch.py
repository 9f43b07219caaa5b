"""torchrun's program for tests/e2e/test_torchtitan_flex.py: torchtitan's own training entry
(`python -m torchtitan.train`), run as it ships, with one function of the torch API it was written against
added where the installed torch lacks it.

torchtitan 0.3.0 calls `torch.distributed.set_timeout(timeout, group)` after the first step of every run, a
module-level function of torch releases newer than the installed one (which has only the per-group method
`ProcessGroup.set_timeout`); without it the trainer stops after step 1 on any device, plain CPU included.
The stand-in below calls that method, which is what the newer function does for a group.
"""

from __future__ import annotations

import runpy
from datetime import timedelta

import torch.distributed as dist

if not hasattr(dist, "set_timeout"):

    def set_timeout(timeout: timedelta, group: dist.ProcessGroup | None = None) -> None:
        (group if group is not None else dist.distributed_c10d._get_default_group()).set_timeout(timeout)

    dist.set_timeout = set_timeout

runpy.run_module("torchtitan.train", run_name="__main__", alter_sys=True)
