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


FRACTION = r"""
import json, torch, torch_npu
out = {"before": [torch.npu.get_per_process_memory_fraction(), torch.npu.memory.get_per_process_memory_fraction(0)]}
torch.npu.set_per_process_memory_fraction(0.01)
out["after"] = torch.npu.get_per_process_memory_fraction(0)
x = torch.empty(200 * 2**20, dtype=torch.uint8, device="npu")  # within 1% of 32 GiB
try:
    torch.empty(400 * 2**20, dtype=torch.uint8, device="npu")
except torch.OutOfMemoryError as e:
    out["oom"] = str(e)
out["num_ooms"] = torch.npu.memory_stats()["num_ooms"]
print(json.dumps(out))
"""


def test_memory_fraction_is_answered_and_enforced() -> None:
    """torch_npu exports get_per_process_memory_fraction from torch.npu and torch.npu.memory; the share
    set_per_process_memory_fraction allows is enforced with torch_npu's out-of-memory error."""
    need_wheel()
    r = run_sim(["-c", FRACTION], {"CUDASHIM_PROFILE": "ascend910b4"})
    assert r.returncode == 0, r.stderr[-4000:]
    got = _last_json(r.stdout)
    assert got["before"] == [1.0, 1.0] and abs(got["after"] - 0.01) < 1e-8  # the core keeps a float
    assert got["oom"].startswith("NPU out of memory. Tried to allocate 400.00 MiB (NPU 0; "), got["oom"]
    assert got["num_ooms"] == 1
