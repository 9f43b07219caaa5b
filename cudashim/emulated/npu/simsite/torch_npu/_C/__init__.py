"""torch_npu._C of the simulated torch_npu: the few natives the real Python files call at import."""
import torch as _torch

from cudashim.emulated.npu import device as _device, graphs as _graphs

from . import _distributed_c10d  # noqa: F401

# the natives the wheel's torch_npu/npu/graphs.py imports: the core's graph recorder under NPUGraph.cpp's rules
globals().update(_graphs.natives(_torch, _device.core()))


def _npu_hostEmptyCache():
    return None  # pinned host memory is returned as it is freed: nothing is cached
