"""NCCL-written programs on Gloo, with the device's cuda tensors.

The backend name and device ids are translated as on the alias layer (aliases/_distributed). Gloo in
a CPU build refuses cuda tensors, so each collective hands it CPU tensors over the same memory
(the core's cpu_view: no copy; results land in the caller's cuda tensors). Two collectives NCCL
accepts and Gloo does not are built from ones it has: all_gather_into_tensor with a flat or stacked
output (an all_gather into views of the output) and reduce_scatter_tensor (an all_reduce, then the
rank's chunk). Not covered yet: DDP's C++ reducer calls the process group directly with cuda buckets.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ..aliases._common import Bindings
from ..aliases._distributed import bind_distributed

__all__ = ["bind"]

_COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce", "send", "recv", "isend", "irecv",
                "all_to_all_single", "all_to_all", "gather", "scatter", "reduce_scatter")


def bind(b: Bindings, torch: Any, core: Any, is_active: Callable[[], bool]) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    bind_distributed(b, torch, {"nccl": "gloo"}, device_id=lambda d: None, device_ids=lambda ids: None,
                     device_type=lambda t: t, is_active=is_active)
    Tensor = torch.Tensor

    def host(x: Any) -> Any:
        if isinstance(x, Tensor):
            return core.cpu_view(x) if x.is_cuda else x
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
            b.bind(ns, name, wrapped, f"torch.distributed.{name}", "emulated")

    all_gather = dist.all_gather
    all_reduce = dist.all_reduce

    def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False) -> Any:
        world = dist.get_world_size(group)
        out = host(output_tensor)
        inp = host(input_tensor)
        parts = [p.view(inp.shape) for p in out.reshape(world, -1).unbind(0)]  # views: written in place
        return all_gather(parts, inp, group=group, async_op=async_op)

    def reduce_scatter_tensor(output: Any, input: Any, op: Any = dist.ReduceOp.SUM, group: Any = None,
                              async_op: bool = False) -> Any:
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        total = host(input).clone()
        work = all_reduce(total, op=op, group=group)
        host(output).copy_(total.reshape(world, -1)[rank].view(output.shape))
        return work if async_op else None

    for ns in (c10d, dist):
        b.bind(ns, "all_gather_into_tensor", all_gather_into_tensor, "torch.distributed.all_gather_into_tensor", "emulated")
        b.bind(ns, "reduce_scatter_tensor", reduce_scatter_tensor, "torch.distributed.reduce_scatter_tensor", "emulated")
