"""Stand-in for torch_npu.npu.amp: transfer_to_npu binds its submodules over torch.cuda.amp."""

from . import autocast_mode, common, grad_scaler  # noqa: F401

__all__: list[str] = []
