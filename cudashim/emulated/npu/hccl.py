"""HCCL on the simulated NPU: process groups of backend "hccl" are Gloo groups that take npu tensors.

torch_npu registers the "hccl" backend for device type npu; here its creator makes a Gloo group
(for npu and cpu tensors). Gloo refuses PrivateUse1 tensors, so each collective hands it CPU
tensors over the same memory (the core's cpu_view, no copy: results land in the caller's npu
tensors). all_gather_into_tensor and reduce_scatter_tensor, which Gloo lacks, are built from
all_gather and all_reduce. transfer_to_npu (the wheel's) turns "nccl" into "hccl" before this.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ..distributed import flat_collectives

__all__ = ["register", "ProcessGroupHCCL"]

_COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce", "send", "recv", "isend", "irecv",
                "all_to_all_single", "all_to_all", "gather", "scatter", "reduce_scatter")


class ProcessGroupHCCL:
    """torch_npu._C._distributed_c10d.ProcessGroupHCCL's name; the groups themselves are Gloo's."""

    class Options:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.hccl_config: dict[str, Any] = {}


def register(torch: Any, core: Any) -> None:
    import torch.distributed as dist

    if not dist.is_available() or "hccl" in dist.Backend.backend_list:
        return

    def create(store: Any, rank: int, size: int, timeout: Any) -> Any:
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    dist.Backend.register_backend("hccl", create, devices=["npu", "cpu"])
    dist.is_hccl_available = lambda: True
    Tensor = torch.Tensor

    def host(x: Any) -> Any:
        if isinstance(x, Tensor):
            return core.cpu_view(x) if x.device.type == "npu" else x
        if isinstance(x, (list, tuple)):
            return type(x)(host(v) for v in x)
        return x

    def hosted(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*(host(a) for a in args), **{k: host(v) for k, v in kwargs.items()})
        return call

    c10d = dist.distributed_c10d
    for name in _COLLECTIVES:
        wrapped = hosted(getattr(c10d, name))
        for ns in (c10d, dist):
            setattr(ns, name, wrapped)
    # Gloo lacks both; built as on the emulated cuda device, over the wrapped (hosting) collectives
    all_gather_into_tensor, reduce_scatter_tensor = flat_collectives(dist, host)
    for ns in (c10d, dist):
        ns.all_gather_into_tensor = all_gather_into_tensor
        ns.reduce_scatter_tensor = reduce_scatter_tensor
