"""Stand-in for torch_npu.profiler: the names transfer_to_npu binds over torch.profiler."""

from __future__ import annotations

import enum

from .. import recorder


class ProfilerActivity(enum.Enum):
    CPU = 0
    NPU = 1


class ProfilerAction(enum.Enum):
    NONE = 0
    RECORD = 1


class _ExperimentalConfig:
    pass


class _KinetoProfile:
    def export_memory_timeline(self, path: str, device: str | None = None) -> None:
        recorder("profiler._KinetoProfile.export_memory_timeline")(path, device=device)


class profile(_KinetoProfile):
    def __init__(self, *args, **kwargs) -> None:
        recorder("profiler.profile")(*args, **kwargs)


schedule = recorder("profiler.schedule")
tensorboard_trace_handler = recorder("profiler.tensorboard_trace_handler")
