"""CUDA idioms transfer_to_npu leaves failing on ascend, each filled or refused with the table's error.

Found by running the CUDA idiom table (tests/cpu/idioms.py) on the simulated NPU, whose torch_npu is
the wheel's transfer_to_npu over the emulated core: each gap below is one the real ascend path has
too, because it lies in torch or in transfer_to_npu's Python, not in the simulator.

* ``torch.cuda.nvtx``: torch's NVTX bindings exist only in a CUDA build of torch (torch_npu runs on
  the CPU build), so every marker raises "NVTX functions not installed". Markers have no receiver on
  an NPU host (msprof reads mstx, not NVTX): they become the emulated device's no-ops (emulated/cuda.py).
* ``Tensor.type("torch.cuda.HalfTensor")``: torch parses the name as a CUDA type and initializes
  CUDA. A ``torch.cuda.``/``torch.npu.`` legacy name becomes the npu tensor of that dtype.
* ``is_cuda`` in compiled code: transfer_to_npu makes eager ``Tensor.is_cuda`` answer ``is_npu``, but
  Dynamo answers ``device.type == "cuda"`` from its own table; compiled code would take the other
  branch. Dynamo answers as eager code does.
* ``torch.nn.DataParallel``: its module bound torch._utils' device-type probe before transfer_to_npu
  patched it, so it looks for cuda:0; its scatter/replicate use CUDA-only communication. Refused at
  construction [capability data_parallel], naming DDP.
"""

from __future__ import annotations

from typing import Any, Callable

from ..emulated.cuda import nvtx_table
from ..platform import capabilities
from . import probes
from ._common import Bindings

__all__ = ["fill_gaps"]

PLATFORM = "ascend"


def _legacy_dtypes(torch: Any) -> dict[str, Any]:
    """The legacy tensor type names (FloatTensor & co.) -> their dtypes, as torch's CPU types say."""
    return {c.__name__: c.dtype for c in torch._tensor_classes if c.__module__ == "torch"}


def _legacy_type(torch: Any, orig: Callable[..., Any]) -> Callable[..., Any]:
    dtypes = _legacy_dtypes(torch)

    def type_(self: Any, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        if isinstance(dtype, str):
            for prefix in ("torch.cuda.", "torch.npu."):
                name = dtype[len(prefix):] if dtype.startswith(prefix) else None
                if name in dtypes:
                    return self.to(device="npu", dtype=dtypes[name], non_blocking=non_blocking)
        return orig(self) if dtype is None else orig(self, dtype, non_blocking, **kwargs)

    type_.__name__ = type_.__qualname__ = "type"  # Dynamo records a tensor method call by this name
    return type_


def _data_parallel_init(orig: Callable[..., Any]) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        capabilities.require("data_parallel", PLATFORM, api="torch.nn.DataParallel")
        orig(self, *args, **kwargs)  # reached only if the table's ascend cell ever allows it

    return __init__


def _bind_dynamo(b: Bindings, active: Callable[[], bool], mod: Any) -> None:
    cls = getattr(mod, "TensorVariable", None)
    orig = getattr(cls, "method_attr_is_cuda", None)
    if not active() or orig is None:
        return
    from torch._dynamo.variables.base import VariableTracker

    def method_attr_is_cuda(self: Any, tx: Any) -> Any:
        device = getattr(self, "device", None)
        if device is not None and device.type == "npu":
            return VariableTracker.build(tx, True)  # eager is_cuda is is_npu (transfer_to_npu)
        return orig(self, tx)

    b.bind(cls, "method_attr_is_cuda", method_attr_is_cuda)


def fill_gaps(b: Bindings, torch: Any, active: Callable[[], bool]) -> None:
    """Bind every gap filler into b (restorable); Dynamo's when it loads."""
    for name, value in nvtx_table().items():
        b.bind(torch.cuda.nvtx, name, value, api=f"torch.cuda.nvtx.{name}", treatment="emulated")
    b.bind(torch.Tensor, "type", _legacy_type(torch, torch.Tensor.type), api="Tensor.type('torch.cuda.*')")
    dp = torch.nn.DataParallel
    b.bind(dp, "__init__", _data_parallel_init(dp.__init__), api="torch.nn.DataParallel", treatment="unsupported")
    probes.when_imported("torch._dynamo.variables.tensor", lambda mod: _bind_dynamo(b, active, mod))
