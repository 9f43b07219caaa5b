"""Devices whose memory is the host's: the emulated devices register their core's `cpu_view` here
at install (the CPU tensor over a device tensor's own memory, no copy).

A replacement kernel written with torch operators (replacements' portable attention, kernels' KV store)
then runs over CPU views of such tensors, PyTorch's CPU operators called directly, as a GPU kernel
reads device memory: one trip through the device per operator costs more than the operator on a
decode step's small tensors. `on_host()` refuses (None) wherever the device's own operators are
needed: a gradient to record, a CUDA graph being captured, Dynamo tracing, a dispatch mode, a tensor
subclass.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch  # never on the start-up path: only torch-using code imports this module

__all__ = ["views", "on_host"]

#: device type -> its cpu_view; bound (and restored) by the emulated device's install
views: dict[str, Callable[[Any], Any]] = {}


def on_host(*tensors: Any) -> Optional[list[Any]]:
    """CPU views of `tensors` (the first a tensor, whose device decides; None entries and tensors of
    other devices pass as they are), or None where the device must run the operators itself.
    Called per kernel call: kept to plain checks."""
    first = tensors[0]
    view = views.get(first.device.type)
    if (view is None or torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack()
            or torch.cuda.is_current_stream_capturing()):
        return None
    index = first.get_device()
    out = []
    for t in tensors:
        if t is not None:
            if type(t) is not torch.Tensor or t.requires_grad:
                return None
            if t.get_device() == index:
                t = view(t)
        out.append(t)
    return out
