"""A recorded stand-in for torch_npu's native parts (tests/ascend only; never installed).

What the real torch_npu does at import that transfer_to_npu relies on is done here with CPU torch:
the PrivateUse1 backend is renamed "npu" (so torch.device("npu:0"), Tensor.is_npu, Module.npu exist),
torch.npu is registered, torch.distributed learns "hccl" (a Gloo group underneath, recorded) and
is_hccl_available. Every native call lands in RECORD as (name, args, kwargs) so tests can see what
reached "the NPU". Pure-Python upstream code (transfer_to_npu.py, apis_config.json, _apply_patches,
the NPUGraph/graph classes) is copied in from the real wheel by tests/ascend/_wheel.py.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

RECORD: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []


def recorder(name: str, result: Any = None) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        RECORD.append((name, args, kwargs))
        return result

    fn.__name__ = fn.__qualname__ = name.rsplit(".", 1)[-1]
    fn.__module__ = name.rpartition(".")[0] or __name__
    return fn


def calls(name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return [(a, k) for n, a, k in RECORD if n == name]


torch.utils.rename_privateuse1_backend("npu")
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)

from . import _C, npu, profiler, utils  # noqa: E402

torch._register_device_module("npu", npu)

# what the real package's import leaves loaded (transfer_to_npu reaches them as attributes)
import torch.distributed  # noqa: E402
import torch.distributed.checkpoint  # noqa: E402,F401
import torch.distributed.device_mesh  # noqa: E402,F401
import torch.distributed.fsdp  # noqa: E402,F401


def _create_hccl(store: Any, rank: int, size: int, timeout: Any) -> Any:
    RECORD.append(("ProcessGroupHCCL", (rank, size), {}))
    return torch.distributed.ProcessGroupGloo(store, rank, size, timeout)


torch.distributed.Backend.register_backend("hccl", _create_hccl, devices=["cpu", "npu"])
torch.distributed.is_hccl_available = lambda: True

__version__ = "2.13.0+standin"
