"""Stand-in for torch_npu.npu.amp.common."""

__all__: list[str] = []
