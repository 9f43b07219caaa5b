"""HCCL on the simulated NPU: process groups of backend "hccl" are Gloo groups that take npu tensors.

torch_npu registers the "hccl" backend for device type npu; here its creator makes a Gloo group
(for npu and cpu tensors). Gloo refuses PrivateUse1 tensors, so the core replaces the c10d
operators' PrivateUse1 kernels (csrc/distributed/collectives.cpp, as for the emulated cuda device) with ones that
hand Gloo CPU tensors over the same memory (no copy: results land in the caller's npu tensors); that
covers Python collectives and DDP's C++ reducer alike. all_gather_into_tensor and
reduce_scatter_tensor, which Gloo lacks, are built from all_gather and all_reduce.
transfer_to_npu (the wheel's) turns "nccl" into "hccl" before this.
"""

from __future__ import annotations

from typing import Any

from ..distributed import flat_collectives, named_groups

__all__ = ["register", "ProcessGroupHCCL"]


class _Options:
    """ProcessGroupHCCL.Options: what torch_npu's backend creator sets on it (timeout, ranks, group id)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import datetime

        self.hccl_config: dict[str, Any] = {}
        self._timeout = datetime.timedelta(minutes=30)
        self.is_high_priority_stream = False
        self.global_ranks_in_group: list[int] = []
        self.group_id = ""


class _GroupMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        import torch.distributed as dist

        return isinstance(obj, dist.ProcessGroupGloo)


_KEEP: list[Any] = []  # the Python side of each backend made: torch_npu reaches it again through _get_backend


def _gloo_class(core: Any) -> type:
    """Gloo with the methods torch_npu's Python calls on the npu backend directly (its gather built from
    allgather, torch_npu/distributed/distributed_c10d.py) taking npu tensors: CPU views of the same
    memory go to Gloo, so the results land in the caller's tensors. Calls through the dispatcher reach
    the core's collectives instead (they do the same in C++)."""
    import torch
    import torch.distributed as dist

    def host(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return core.cpu_view(x) if x.device.type == "npu" else x
        if isinstance(x, (list, tuple)):
            return type(x)(host(v) for v in x)
        return x

    class ProcessGroupHCCLOverGloo(dist.ProcessGroupGloo):
        def allgather(self, output_tensors: Any, input_tensors: Any, *args: Any) -> Any:
            return super().allgather(host(output_tensors), host(input_tensors), *args)

        def gather(self, output_tensors: Any, input_tensors: Any, *args: Any) -> Any:
            return super().gather(host(output_tensors), host(input_tensors), *args)

        def allreduce(self, tensors: Any, *args: Any) -> Any:
            return super().allreduce(host(tensors), *args)

        def broadcast(self, tensors: Any, *args: Any) -> Any:
            return super().broadcast(host(tensors), *args)

    return ProcessGroupHCCLOverGloo


class ProcessGroupHCCL(metaclass=_GroupMeta):
    """torch_npu._C._distributed_c10d.ProcessGroupHCCL: constructing one (as torch_npu's registered
    "hccl" backend creator does: store, rank, size, options) makes the Gloo group underneath."""

    Options = _Options
    _core: Any = None

    def __new__(cls, store: Any, rank: int, size: int, options: Any = None) -> Any:
        import torch.distributed as dist

        make = _gloo_class(cls._core) if cls._core is not None else dist.ProcessGroupGloo
        timeout = getattr(options, "_timeout", None)
        group = make(store, rank, size) if timeout is None else make(store, rank, size, timeout)
        _KEEP.append(group)
        return group


def register(torch: Any, core: Any, backend: bool = True) -> None:
    """backend=False: the wheel's torch_npu registers the "hccl" backend itself (over ProcessGroupHCCL);
    here only the core's collectives for npu tensors and the groups' cpu side are set up."""
    import torch.distributed as dist

    if not dist.is_available() or (backend and "hccl" in dist.Backend.backend_list):
        return
    ProcessGroupHCCL._core = core

    if backend:
        def create(store: Any, rank: int, size: int, timeout: Any) -> Any:
            return dist.ProcessGroupGloo(store, rank, size, timeout)

        dist.Backend.register_backend("hccl", create, devices=["npu", "cpu"])
    dist.is_hccl_available = lambda: True
    core.register_collectives()
    Tensor = torch.Tensor

    def host(x: Any) -> Any:
        return core.cpu_view(x) if isinstance(x, Tensor) and x.device.type == "npu" else x

    # Gloo lacks both; built as on the emulated cuda device
    all_gather_into_tensor, reduce_scatter_tensor = flat_collectives(dist, host)
    for ns in (dist.distributed_c10d, dist):
        ns.all_gather_into_tensor = all_gather_into_tensor
        ns.reduce_scatter_tensor = reduce_scatter_tensor
    # an "hccl" group for npu only (init_process_group() picks it as the accelerator's default, or
    # "npu:hccl") also needs the cpu backend the core's collectives reach Gloo through
    c10d = dist.distributed_c10d
    c10d._new_process_group_helper = named_groups(c10d, torch, c10d._new_process_group_helper, name="hccl",
                                                  device="npu", made_as="hccl")
