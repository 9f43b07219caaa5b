"""torch_npu.npu of the simulated torch_npu: the device module, over the PrivateUse1 core.

Stands in for the wheel's torch_npu/npu/__init__.py, whose functions call torch_npu._C (the NPU
runtime) on every line; the answers come from cudashim/emulated/npu/module.py instead.
"""
import torch

from cudashim.emulated.npu import device as _device, graphs as _graphs
from cudashim.emulated.npu.module import NpuDeviceModule as _Module, stream_table as _streams

_dm = _Module(torch, _device.core())
_table = dict(_dm.table())
_table.update(_streams(torch, _dm.index))
_table["synchronize"] = _graphs.refusing_synchronize(_device.core(), _table["synchronize"])
globals().update(_table)

from . import amp, memory, random  # noqa: E402
from .memory import host_empty_cache  # noqa: E402
from ._tensortypes import *  # noqa: E402,F403  - torch.npu.FloatTensor & co.
from ._tensortypes import __all__ as _tensortypes
from .graphs import (NPUGraph, graph, graph_pool_handle, is_current_stream_capturing,  # noqa: E402
                     make_graphed_callables)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all,  # noqa: E402
                     seed, seed_all, set_rng_state, set_rng_state_all)

default_generators = _dm.generators()
_initialized = True


def _lazy_call(callable, **kwargs):
    callable()  # the device is initialized at import: what would wait runs now


def _lazy_init():
    return None


def is_initialized():
    return True


def _is_in_bad_fork():
    return False


def get_autocast_dtype():
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype):
    return torch.set_autocast_dtype("npu", dtype)


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16, torch.float32]


def is_autocast_enabled():
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enabled):
    return torch.set_autocast_enabled("npu", enabled)


__all__ = sorted(set(_table) | {
    "amp", "memory", "random", "host_empty_cache", "NPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
    "make_graphed_callables", "default_generators", "get_rng_state",
    "get_rng_state_all", "initial_seed", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state",
    "set_rng_state_all", "is_initialized", "get_autocast_dtype", "set_autocast_dtype", "get_amp_supported_dtype",
    "is_autocast_enabled", "set_autocast_enabled", *_tensortypes})
