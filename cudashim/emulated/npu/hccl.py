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
