"""The capability table's ascend refusals, run under `cudashim run --platform ascend --simulate`.

Each cell below raises (or does nothing) on the simulated NPU as the table's ascend column says,
through the ascend alias layer over the wheel's transfer_to_npu: these are the cells marked L1s.
"""

from __future__ import annotations

import json

from _sim import need_wheel, run_sim

CHECKS = r"""
import json, torch
from cudashim.errors import CapabilityError

def outcome(fn):
    try:
        fn()
    except CapabilityError as exc:
        return str(exc)
    return None

g = torch.cuda.CUDAGraph(keep_graph=True)  # accepted: an NPU graph exists only instantiated
import torch.distributed._symmetric_memory as symm
print(json.dumps({
    "graph_type": type(g).__mro__[1].__name__,
    "instantiate": outcome(g.instantiate),
    "raw_cuda_graph": outcome(g.raw_cuda_graph),
    "raw_cuda_graph_exec": outcome(g.raw_cuda_graph_exec),
    "symm_mem_empty": outcome(lambda: symm.empty(4, device="cuda")),
    "data_parallel": outcome(lambda: torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda())),
}))
"""


def test_ascend_refusals_on_the_simulated_npu():
    need_wheel()
    r = run_sim(["-c", CHECKS], {"CUDASHIM_NPU_DEVICES": "2"})
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["graph_type"] == "NPUGraph"  # torch.cuda.CUDAGraph is the NPU graph (transfer_to_npu + ours)
    assert got["instantiate"] is None  # cuda_graph_instantiate: a no-op on ascend
    assert "[capability cuda_graph_keep_graph]" in got["raw_cuda_graph"]
    assert "[capability graph_event_timers]" in got["raw_cuda_graph_exec"]
    assert "[capability symmetric_memory]" in got["symm_mem_empty"]
    assert "[capability data_parallel]" in got["data_parallel"]
