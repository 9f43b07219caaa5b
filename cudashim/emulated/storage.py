"""Untyped storages on the emulated device: `storage.cuda()`, `storage.to("cuda")` and so `torch.load`
of a checkpoint saved from cuda tensors (its default map location is the saving device);
`storage.clone()` and so `copy.deepcopy` of cuda tensors and modules.

torch moves a storage to a device by constructing `torch.UntypedStorage(n, device=...)` (torch._utils._to),
and a CPU build's constructor knows no cuda storage ("Storage device not recognized: cuda"). The
device's storages exist all the same — every cuda tensor has one — so the move allocates a byte
tensor on the device and takes its storage; the copy is storage.copy_, as in torch's own code
(the same for clone).
"""

from __future__ import annotations

from typing import Any

__all__ = ["bind"]


def bind(b: Any, torch: Any) -> None:
    """Register the storage move into b (restorable bindings): torch._utils._to and torch.storage's import of it."""
    import torch._utils as tu
    import torch.storage as ts

    original = tu._to

    def _to(self: Any, device: Any, non_blocking: bool = False) -> Any:
        dev = torch.device(device)
        if dev.type != "cuda" or self.device == dev or self.is_sparse:
            return original(self, device, non_blocking)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        out = torch.empty(self.size(), dtype=torch.uint8, device=dev).untyped_storage()
        out.copy_(self, non_blocking)
        return out

    for ns in (tu, ts):
        if getattr(ns, "_to", None) is original:
            b.bind(ns, "_to", _to, "torch.UntypedStorage.to", "emulated")

    clone = ts._StorageBase.clone

    def _clone(self: Any) -> Any:  # copy.deepcopy of a cuda tensor or module clones its storage
        if self.device.type != "cuda":
            return clone(self)
        return torch.empty(self.nbytes(), dtype=torch.uint8, device=self.device).untyped_storage().copy_(self)

    b.bind(ts._StorageBase, "clone", _clone, "torch.UntypedStorage.clone", "emulated")
