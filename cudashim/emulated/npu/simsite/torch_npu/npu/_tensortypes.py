"""torch.npu.FloatTensor & co. of the simulated torch_npu: the legacy tensor types torch_npu's native
start-up adds to torch.npu (torch_npu/csrc/utils/TensorType.cpp), here as Python classes.

As torch's legacy types: isinstance() holds for a strided npu tensor of the dtype; calling one makes
an npu tensor, from data (FloatTensor([1.0, 2.0])) or sizes (FloatTensor(2, 3), uninitialized).
"""
import torch

_DTYPES = {c.__name__: c.dtype for c in torch._tensor_classes if c.__module__ == "torch"}  # torch's CPU types
__all__ = sorted(_DTYPES)


class _LegacyType(type):
    def __instancecheck__(cls, obj):
        return (isinstance(obj, torch.Tensor) and obj.device.type == "npu" and obj.dtype == cls.dtype
                and obj.layout == torch.strided)


def _make(name, dtype):
    def __new__(cls, *args, device=None):
        dev = torch.device("npu") if device is None else torch.device(device)
        if len(args) == 1 and not isinstance(args[0], int):
            data = args[0]
            if isinstance(data, torch.Tensor):
                return data.to(device=dev, dtype=dtype)
            return torch.tensor(data, dtype=dtype, device=dev)
        return torch.empty(*args, dtype=dtype, device=dev)

    return _LegacyType(name, (), {"__new__": __new__, "dtype": dtype, "is_sparse": False, "is_cuda": True,
                                  "__module__": "torch.npu"})


globals().update({n: _make(n, d) for n, d in _DTYPES.items()})
