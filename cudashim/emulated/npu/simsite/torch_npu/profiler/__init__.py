"""torch_npu.profiler of the simulated torch_npu: torch.profiler, with NPU activity recorded as CPU time."""
import enum

import torch.profiler as _tp
from torch.profiler.profiler import _KinetoProfile  # noqa: F401

schedule = _tp.schedule
tensorboard_trace_handler = _tp.tensorboard_trace_handler
ProfilerAction = _tp.ProfilerAction
__all__ = ["profile", "schedule", "tensorboard_trace_handler", "ProfilerAction", "ProfilerActivity"]


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"


class _ExperimentalConfig:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class profile(_tp.profile):
    def __init__(self, *args, activities=None, experimental_config=None, **kwargs):
        # the simulated NPU's kernels are CPU kernels: every activity is CPU activity
        super().__init__(*args, activities=[_tp.ProfilerActivity.CPU] if activities is not None else None, **kwargs)
