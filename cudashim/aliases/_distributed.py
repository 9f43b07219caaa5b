"""torch.distributed for CUDA-written code on another target: the backend name and device ids.

Platform-neutral: the caller gives the backend map ({"nccl": "gloo"} on cpu, {"nccl": "hccl"} on
ascend) and how a CUDA device id / device-id list translates (on cpu: dropped, because Gloo and
CPU DDP take no device ids; on an accelerator: rewritten). Modules torch does not import eagerly
(FSDP) are bound when they load, through the one import hook.
"""

from __future__ import annotations

from typing import Any, Callable

from ._common import Bindings, translate_backend, when_imported, wrap_args

__all__ = ["bind_distributed"]


def bind_distributed(b: Bindings, torch: Any, backend_map: dict[str, str],
                     device_id: Callable[[Any], Any], device_ids: Callable[[Any], Any],
                     device_type: Callable[[Any], Any], is_active: Callable[[], bool],
                     fsdp_device_id: Callable[[Any], Any] | None = None) -> None:
    """Bind the distributed aliases into b.

    device_id maps one device (init_process_group/new_group device_id, DDP output_device),
    device_ids a list of them (DDP device_ids, barrier), device_type a DeviceMesh device type,
    fsdp_device_id FSDP's device_id (default: device_id). is_active tells late callbacks (FSDP
    loading after uninstall) to do nothing.
    """
    fsdp_device_id = fsdp_device_id or device_id
    import torch.distributed as dist

    if not dist.is_available():
        return
    c10d = dist.distributed_c10d

    def backend(x: Any) -> Any:
        return translate_backend(x, backend_map)

    ipg = wrap_args(c10d.init_process_group, {"backend": (0, backend), "device_id": (8, device_id)})
    ng = wrap_args(c10d.new_group, {"backend": (2, backend), "device_id": (6, device_id)})
    barrier = wrap_args(c10d.barrier, {"device_ids": (2, device_ids)})
    for ns in (c10d, dist):
        b.bind(ns, "init_process_group", ipg, "torch.distributed.init_process_group", "aliased")
        b.bind(ns, "new_group", ng, "torch.distributed.new_group", "aliased")
        b.bind(ns, "barrier", barrier, "torch.distributed.barrier", "aliased")

    # Only the public name: torch's own c10d code calls its module-global is_nccl_available() and
    # then touches ProcessGroupNCCL, which a build without NCCL does not have (inductor's cache does).
    b.bind(dist, "is_nccl_available", _true, "torch.distributed.is_nccl_available", "aliased")

    ddp = torch.nn.parallel.DistributedDataParallel
    b.bind(ddp, "__init__", wrap_args(ddp.__init__, {"device_ids": (2, device_ids), "output_device": (3, device_id)}),
           "torch.nn.parallel.DistributedDataParallel", "aliased")

    def mesh(mod: Any) -> None:
        if not is_active():
            return
        b.bind(mod, "init_device_mesh", wrap_args(mod.init_device_mesh, {"device_type": (0, device_type)}),
               "torch.distributed.device_mesh.init_device_mesh", "aliased")
        if hasattr(mod, "DeviceMesh"):
            b.bind(mod.DeviceMesh, "__init__", wrap_args(mod.DeviceMesh.__init__, {"device_type": (1, device_type)}))
        parent = getattr(dist, "init_device_mesh", None)
        if parent is not None:
            b.bind(dist, "init_device_mesh", mod.init_device_mesh)

    def fsdp(mod: Any) -> None:
        if not is_active():
            return
        cls = mod.FullyShardedDataParallel
        init = wrap_args(cls.__init__, {"device_id": (10, fsdp_device_id)})

        def fsdp_init(self: Any, *args: Any, **kwargs: Any) -> None:
            if len(args) <= 9 and "device_id" not in kwargs:  # not given: the target may need naming
                default = fsdp_device_id(None)
                if default is not None:
                    kwargs["device_id"] = default
            init(self, *args, **kwargs)

        b.bind(cls, "__init__", fsdp_init, "torch.distributed.fsdp.FullyShardedDataParallel", "aliased")

    when_imported("torch.distributed.device_mesh", mesh)
    when_imported("torch.distributed.fsdp.fully_sharded_data_parallel", fsdp)


def _true(*args: Any, **kwargs: Any) -> bool:
    return True
