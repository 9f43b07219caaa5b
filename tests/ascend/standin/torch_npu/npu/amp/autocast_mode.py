"""Stand-in for torch_npu.npu.amp.autocast_mode."""

__all__: list[str] = []
