"""Device tensors across processes, with CUDA IPC's semantics over shared host memory.

On a GPU, a cuda tensor put on a torch.multiprocessing queue or passed to a spawned process travels
as a CUDA IPC handle: the receiver maps the sender's device memory, so writes on either side are
seen by the other, and the memory lives while either side uses it. Here a device tensor's memory is
host memory: when a device tensor is first sent, its storage moves into POSIX shared memory (its
bytes copied once; from then on every tensor over that storage, in this process, uses the shared
block — the core's rehome()), and the shared block travels as torch.multiprocessing sends a CPU
storage (the sharing strategy, file descriptors or file names, is torch's). The receiver makes a
device tensor of the same device, dtype, offset, sizes and strides over the mapped block (the
core's device_over()). Either side keeps the block alive as long as it holds a tensor over it.

Differences from CUDA that a program can observe: the moved storage leaves the device's allocator
(memory_allocated() drops by its size, as its block now belongs to the shared mapping), and a sent
storage alone (an UntypedStorage rather than a tensor) travels as torch's reducer sends it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bind"]


def bind(b: Any, torch: Any, core: Any) -> None:
    """Register the reducers of device tensors with torch.multiprocessing's pickler (restorable)."""
    import torch.multiprocessing  # noqa: F401  (its import registers torch's reducers, which ours wrap)
    from torch.multiprocessing import reductions

    pickler = reductions.reduction.ForkingPickler  # multiprocessing.reduction's, where torch registers
    reducers = dict(pickler._extra_reducers)
    tensor_reducer = reducers.get(torch.Tensor, reductions.reduce_tensor)

    def shared_block(tensor: Any) -> Any:
        """The CPU shared-memory storage holding tensor's device storage, moving it there the first time."""
        host = core.host_owner(tensor)
        if host is not None and host.untyped_storage().is_shared():
            return host.untyped_storage()
        block = torch.UntypedStorage(tensor.untyped_storage().nbytes())
        block.share_memory_()
        core.rehome(tensor, torch.empty(0, dtype=torch.uint8).set_(block))
        return block

    def reduce_tensor(tensor: Any) -> Any:
        if tensor.device.type != "cuda":
            return tensor_reducer(tensor)
        if tensor.requires_grad and not tensor.is_leaf:
            raise RuntimeError(
                "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not "
                "support crossing process boundaries.  If you just want to transfer the data, call detach() "
                "on the tensor before serializing (e.g., putting it on the queue).")
        meta = (tensor.get_device(), tensor.dtype, tensor.storage_offset(), tuple(tensor.size()),
                tuple(tensor.stride()), tensor.requires_grad)
        return (rebuild_device_tensor, (type(tensor), shared_block(tensor), meta))

    reducers[torch.Tensor] = reduce_tensor
    reducers[torch.nn.parameter.Parameter] = reduce_tensor
    b.bind(pickler, "_extra_reducers", reducers)


def rebuild_device_tensor(cls: type, block: Any, meta: tuple) -> Any:
    """A device tensor over another process's shared block (the receiving side of reduce_tensor)."""
    import torch

    from ._build import load  # the core this process loaded at install (cached), not the package face

    index, dtype, offset, size, stride, requires_grad = meta
    memory = load("CUDA").device_over(torch.empty(0, dtype=torch.uint8).set_(block), index)
    t = torch.empty(0, dtype=dtype, device=memory.device).set_(memory.untyped_storage(), offset, size, stride)
    if cls is torch.nn.parameter.Parameter:
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t
