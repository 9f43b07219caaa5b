"""Stand-in for torch_npu.npu.amp.grad_scaler."""

__all__: list[str] = []
