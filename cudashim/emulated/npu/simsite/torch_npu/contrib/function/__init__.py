"""torch_npu.contrib.function stand-in: the NPU fused functions are not simulated."""
npu_functional = type(__import__("sys"))("torch_npu.contrib.function.npu_functional")
npu_functional.__all__ = []
