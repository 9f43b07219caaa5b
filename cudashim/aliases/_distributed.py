"""torch.distributed for NCCL-written code on another backend: the backend name.

Platform-neutral: the caller gives the backend map ({"nccl": "gloo"} on cpu). Device ids, device
meshes and DDP/FSDP arguments pass unchanged: the emulated device's cuda tensors are what they name.
"""

from __future__ import annotations

from typing import Any

from ._common import Bindings, translate_backend, wrap_args

__all__ = ["bind_distributed"]


def bind_distributed(b: Bindings, torch: Any, backend_map: dict[str, str]) -> None:
    """Bind the backend translation into b."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    c10d = dist.distributed_c10d

    def backend(x: Any) -> Any:
        return translate_backend(x, backend_map)

    ipg = wrap_args(c10d.init_process_group, {"backend": (0, backend)})
    ng = wrap_args(c10d.new_group, {"backend": (2, backend)})
    for ns in (c10d, dist):
        b.bind(ns, "init_process_group", ipg, "torch.distributed.init_process_group", "aliased")
        b.bind(ns, "new_group", ng, "torch.distributed.new_group", "aliased")

    # Only the public name: torch's own c10d code calls its module-global is_nccl_available() and
    # then touches ProcessGroupNCCL, which a build without NCCL does not have (inductor's cache does).
    b.bind(dist, "is_nccl_available", _true, "torch.distributed.is_nccl_available", "aliased")


def _true(*args: Any, **kwargs: Any) -> bool:
    return True
