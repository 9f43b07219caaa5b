"""NCCL-written programs on Gloo, with the device's cuda tensors.

The backend name and device ids are translated by the caller (the cpu platform's alias step). Gloo
cannot take cuda tensors; the core (csrc/collectives.cpp) replaces the c10d operators' CUDA kernels
with ones that hand Gloo CPU tensors over the same memory, which covers Python collectives and
DDP's C++ reducer alike. Two collectives NCCL accepts and Gloo does not are built here from ones it
has: all_gather_into_tensor with a flat or stacked output (an all_gather into views of the output)
and reduce_scatter_tensor (an all_reduce, then the rank's chunk).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["bind", "flat_collectives"]


def flat_collectives(dist: Any, host: Callable[[Any], Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """all_gather_into_tensor and reduce_scatter_tensor as NCCL takes them (flat or stacked buffers), built
    from Gloo's all_gather and all_reduce on host(tensor): the CPU view of a device tensor's memory."""
    all_gather, all_reduce = dist.all_gather, dist.all_reduce

    def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False) -> Any:
        world = dist.get_world_size(group)
        out, inp = host(output_tensor), host(input_tensor)
        parts = [p.view(inp.shape) for p in out.reshape(world, -1).unbind(0)]  # views: written in place
        return all_gather(parts, inp, group=group, async_op=async_op)

    def reduce_scatter_tensor(output: Any, input: Any, op: Any = dist.ReduceOp.SUM, group: Any = None,
                              async_op: bool = False) -> Any:
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        total = host(input).clone()
        work = all_reduce(total, op=op, group=group)
        host(output).copy_(total.reshape(world, -1)[rank].view(output.shape))
        return work if async_op else None

    return all_gather_into_tensor, reduce_scatter_tensor


def bind(b: Any, torch: Any, core: Any) -> None:
    """Register the collectives' bindings into b (restorable bindings)."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    core.register_collectives()
    Tensor = torch.Tensor

    def host(x: Any) -> Any:
        if isinstance(x, Tensor):
            return core.cpu_view(x) if x.is_cuda else x
        if isinstance(x, (list, tuple)):
            return type(x)(host(v) for v in x)
        return x

    c10d = dist.distributed_c10d
    all_gather_into_tensor, reduce_scatter_tensor = flat_collectives(dist, host)
    for ns in (c10d, dist):
        b.bind(ns, "all_gather_into_tensor", all_gather_into_tensor, "torch.distributed.all_gather_into_tensor", "emulated")
        b.bind(ns, "reduce_scatter_tensor", reduce_scatter_tensor, "torch.distributed.reduce_scatter_tensor", "emulated")
