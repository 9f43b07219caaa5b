"""The simulated NPU's memory: torch_npu's out-of-memory error (type, "NPU out of memory" wording,
num_ooms), with the host's memory and under an Ascend 910B device profile (name, cores, memory)."""

from __future__ import annotations

import json

from _sim import need_wheel, run_sim

SCRIPT = r"""
import json, torch, torch_npu
p = torch.npu.get_device_properties(0)
out = {"name": p.name, "total": p.total_memory, "cube": p.cube_core_num, "info": list(torch.npu.mem_get_info())}
try:
    torch.empty(2 * p.total_memory + 2**30, dtype=torch.uint8, device="npu")
except torch.OutOfMemoryError as e:
    out["oom"] = str(e)
out["num_ooms"] = torch.npu.memory_stats()["num_ooms"]
print(json.dumps(out))
"""


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_npu_out_of_memory_is_torch_npus() -> None:
    need_wheel()
    r = run_sim(["-c", SCRIPT])
    assert r.returncode == 0, r.stderr[-4000:]
    got = _last_json(r.stdout)
    assert got["oom"].startswith("NPU out of memory. Tried to allocate "), got["oom"]
    assert " (NPU 0; " in got["oom"] and " total capacity; " in got["oom"], got["oom"]
    assert got["num_ooms"] == 1


def test_npu_profile_presents_the_part() -> None:
    need_wheel()
    r = run_sim(["-c", SCRIPT], {"CUDASHIM_PROFILE": "ascend910b4"})
    assert r.returncode == 0, r.stderr[-4000:]
    got = _last_json(r.stdout)
    assert (got["name"], got["total"], got["cube"]) == ("Ascend910B4", 32 * 2**30, 20)
    assert got["info"] == [32 * 2**30, 32 * 2**30]
    assert got["oom"].startswith("NPU out of memory. Tried to allocate 65.00 GiB (NPU 0; 32.00 GiB total capacity; "
                                 "0 bytes already allocated; 0 bytes current active; 32.00 GiB free; 0 bytes reserved "
                                 "in total by PyTorch).If reserved memory is >> allocated memory"), got["oom"]
    assert got["num_ooms"] == 1
    assert "cudashim preflight (ascend910b4, npu:0, 32.00 GiB)" in r.stderr
