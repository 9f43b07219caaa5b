"""Where the idiom table's CUDA-written code, on the ascend platform, is not meant to equal its CPU twin.

ANSWERS: the code answers as an NPU does, for the reason given (a row of the capability table where
there is one); the CPU-written code beside it computes that answer on plain torch, and the runner
compares with it instead of the twin. RAISES: the error the code raises, and why (the capability
error the table promises, or the error a CUDA device raises for the same code). Every other idiom
must equal its twin.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpu"))

import idioms as _i  # noqa: E402  - read-only: the table's own helpers build the answers

__all__ = ["ANSWERS", "RAISES", "SIM_NAME", "SIM_AI_CORES"]

SIM_NAME = "Ascend910B (simulated on the CPU)"  # cudashim/emulated/npu/module.py: the simulated part
SIM_AI_CORES = 24  # a 910B's AI (cube) cores: what the simulated NPU's multi_processor_count says

_DEVICE_TYPE = "device type npu, not cuda [capability cuda_device_semantics]"
_HCCL = "NCCL becomes HCCL [capability collective_backend]"


def _pg_twin(fn: Callable[[], Any], backend: str = "hccl") -> Callable[[], Any]:
    return lambda: (_i._pg("gloo", fn)[0], backend)


def _mesh() -> Any:
    (_, out), _ = _i._pg("gloo", lambda: _i._mesh_fully_shard("cpu"))
    return (False, out), "hccl"  # the mesh's device type is npu, not the "cuda" asked for


def _new_group() -> Any:
    (t, _), _ = _i._pg("gloo", lambda: _i._new_group("gloo", "cpu"))
    return (t, "hccl"), "hccl"


ANSWERS: dict[str, tuple[str, Callable[[], Any]]] = {
    "meta init + to_empty": (_DEVICE_TYPE, lambda: (False, _i._to_empty("cpu")[1])),
    "set_default_device": (_DEVICE_TYPE, lambda: (_i._default_device("cpu")[0], False)),
    "Tensor.type() name": (_DEVICE_TYPE, lambda: "torch.npu.FloatTensor"),
    "init_device_mesh('cuda') + fully_shard": (_DEVICE_TYPE + "; " + _HCCL, _mesh),
    "init_process_group('nccl') + all_reduce": (_HCCL, _pg_twin(lambda: _i._allreduce("cpu"))),
    "init_process_group(device_id=)": (_HCCL, _pg_twin(lambda: _i._allreduce("cpu"))),
    "backend 'cpu:gloo,cuda:nccl'": (_HCCL, _pg_twin(lambda: _i._allreduce("cpu"), "cpu:gloo,npu:hccl")),
    "new_group(backend='nccl') + barrier(device_ids)": (_HCCL, _new_group),
    "FSDP(device_id=current_device())": (_HCCL, _pg_twin(lambda: _i._fsdp("cpu", True))),
    "FSDP(model.cuda()) without device_id": (_HCCL, _pg_twin(lambda: _i._fsdp("cpu", False))),
    "DDP(device_ids=[local_rank])": (_HCCL, _pg_twin(lambda: _i._ddp("cpu"))),
    "get_device_name": ("torch.cuda's device queries answer for the NPU (transfer_to_npu)", lambda: SIM_NAME),
    "get_device_properties": ("the NPU's properties: host memory, the 910B's AI cores",
                              lambda: (_i._proc_kb("/proc/meminfo", "MemTotal"), SIM_AI_CORES)),
    "get_device_capability": ("torch_npu answers None unless TORCH_NPU_DEVICE_CAPABILITY is set", lambda: None),
}

RAISES: dict[str, tuple[str, str, str]] = {
    "nn.DataParallel": ("CapabilityError", "[capability data_parallel]", "the table refuses DataParallel on ascend"),
}
