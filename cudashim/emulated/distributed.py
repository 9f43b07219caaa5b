"""NCCL-written programs on Gloo, with the device's cuda tensors.

Gloo cannot take cuda tensors; the core (csrc/distributed/collectives.cpp) replaces the c10d operators' CUDA kernels
with ones that hand Gloo CPU tensors over the same memory, which covers Python collectives and
DDP's C++ reducer alike. Two collectives NCCL accepts and Gloo does not are built here from ones it
has: all_gather_into_tensor (and its other names, all_gather_single, _all_gather_base) with a flat or
stacked output (an all_gather into views of the output) and reduce_scatter_tensor (an all_reduce,
then the rank's chunk). What NCCL-written code observes of its groups is nccl.py's.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .. import _torch_compat

__all__ = ["bind", "flat_collectives", "named_groups"]


def flat_collectives(dist: Any, host: Callable[[Any], Any],
                     native: Callable[..., Any] | None = None) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """all_gather_into_tensor and reduce_scatter_tensor as NCCL takes them (flat or stacked buffers), built
    from Gloo's all_gather and all_reduce on host(tensor): the CPU view of a device tensor's memory.
    native: the torch function that gathers a dim-0 concatenation itself (Gloo's _allgather_base), kept
    for that layout (FSDP2's all-gathers)."""
    all_gather, all_reduce = dist.all_gather, dist.all_reduce

    def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False) -> Any:
        world = dist.get_world_size(group)
        if native is not None and input_tensor.dim() > 0 and output_tensor.shape[1:] == input_tensor.shape[1:] \
                and output_tensor.shape[0] == world * input_tensor.shape[0]:
            return native(output_tensor, input_tensor, group, async_op)
        out, inp = host(output_tensor), host(input_tensor)
        parts = [p.view(inp.shape) for p in out.reshape(world, -1).unbind(0)]  # views: written in place
        return all_gather(parts, inp, group=group, async_op=async_op)

    def reduce_scatter_tensor(output: Any, input: Any, op: Any = dist.ReduceOp.SUM, group: Any = None,
                              async_op: bool = False) -> Any:
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        total = input.clone()  # on the device, so the reduction is the group's own (NCCL's on an "nccl" group)
        work = all_reduce(total, op=op, group=group)
        host(output).copy_(host(total).reshape(world, -1)[rank].view(output.shape))
        return work if async_op else None

    return all_gather_into_tensor, reduce_scatter_tensor


def named_groups(c10d: Any, torch: Any, original: Callable[..., Any], *, name: str, device: str, made_as: str,
                 backend_type: Any = None) -> Callable[..., Any]:
    """c10d._new_process_group_helper, through which init_process_group, new_group and new_subgroups make
    every group, for a device whose collective backend `name` ("nccl", "hccl") is served by `made_as`.

    A group `name` would serve (by name, "device:name" strings, or as the accelerator's default when
    none is given) is made with `made_as` for its devices and for cpu: the core's collectives run the
    backend on CPU views of device tensors through the group's cpu backend. It then keeps the name
    and configuration it has on the real device (get_backend, get_backend_config) and, given
    backend_type, that default backend type (ProcessGroup.name()).
    """
    sig = inspect.signature(original)
    pg_type = c10d.ProcessGroup

    def _new_process_group_helper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        backend = bound.arguments["backend"]
        try:
            names = {d: str(v) for d, v in c10d.BackendConfig(backend).get_device_backend_map().items()}
        except (ValueError, KeyError):
            names = {}  # torch's own error comes from the real call
        if name not in names.values():
            return original(*args, **kwargs)
        made = {d: made_as if v == name else v for d, v in names.items()}
        made.setdefault("cpu", made_as)
        # one name when one backend serves all: its capability is {cpu, device}, and the
        # "device:backend" form loses a plugin's default backend type (torch compares it upper-cased)
        spec = made_as if set(made.values()) == {made_as} else ",".join(f"{d}:{v}" for d, v in made.items())
        bound.arguments["backend"] = c10d.Backend(spec)
        options = bound.arguments.get("backend_options")
        if options is not None and getattr(options, "backend", made_as) == name:
            bound.arguments["backend_options"] = None  # the real backend's tuning: nothing for made_as
        pg, store = original(*bound.args, **bound.kwargs)
        world = c10d._world
        if isinstance(pg, pg_type) and pg in world.pg_map:
            if backend_type is not None:
                dev = torch.device(device)
                pg._register_backend(dev, backend_type, pg._get_backend(dev))
                pg._set_default_backend(backend_type)
            world.pg_map[pg] = (backend, world.pg_map[pg][1])
            world.pg_backend_config[pg] = ",".join(f"{d}:{v}" for d, v in names.items())
        return pg, store

    _new_process_group_helper.__wrapped__ = original  # type: ignore[attr-defined]
    return _new_process_group_helper


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
    gathers = _torch_compat.flat_all_gathers(c10d)
    single = getattr(c10d, "all_gather_single", None) if "all_gather_single" in gathers else None
    all_gather_into_tensor, reduce_scatter_tensor = flat_collectives(dist, host, single)
    for ns in (c10d, dist):
        for name in gathers:
            b.bind(ns, name, all_gather_into_tensor, f"torch.distributed.{name}", "emulated")
        b.bind(ns, "reduce_scatter_tensor", reduce_scatter_tensor, "torch.distributed.reduce_scatter_tensor", "emulated")
