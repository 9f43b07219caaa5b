"""torch_npu.npu.amp of the simulated torch_npu: torch.amp for device type npu."""
from . import autocast_mode, common, grad_scaler
from .autocast_mode import autocast, custom_bwd, custom_fwd
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]
