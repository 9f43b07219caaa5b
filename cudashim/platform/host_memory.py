"""Devices whose memory is the host's: the emulated devices register their core's `cpu_view` here
at install (the CPU tensor over a device tensor's own memory, no copy).

A replacement kernel written with torch operators (npu_ops' portable attention, kernels' KV store)
then runs over CPU views of such tensors, PyTorch's CPU operators called directly, as a GPU kernel
reads device memory: one trip through the device per operator costs more than the operator on a
decode step's small tensors. `on_host()` refuses (None) wherever the device's own operators are
needed: a gradient to record, a CUDA graph being captured, Dynamo tracing, a dispatch mode, a tensor
subclass.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

__all__ = ["views", "on_host"]

#: device type -> its cpu_view; bound (and restored) by the emulated device's install
views: dict[str, Callable[[Any], Any]] = {}


def on_host(*tensors: Any) -> Optional[list[Any]]:
    """CPU views of `tensors` (None entries and CPU tensors pass as they are), or None where the
    device must run the operators itself. The first tensor's device decides."""
    import torch

    view = views.get(tensors[0].device.type) if tensors and tensors[0] is not None else None
    if view is None:
        return None
    if any(t is not None and (type(t) is not torch.Tensor or t.requires_grad) for t in tensors):
        return None
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0 or torch.cuda.is_current_stream_capturing():
        return None
    kind = tensors[0].device.type
    return [view(t) if t is not None and t.device.type == kind else t for t in tensors]
