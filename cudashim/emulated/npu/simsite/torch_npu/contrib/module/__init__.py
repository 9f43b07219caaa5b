"""torch_npu.contrib.module stand-in: the NPU fused modules are not simulated."""
npu_modules = type(__import__("sys"))("torch_npu.contrib.module.npu_modules")
npu_modules.__all__ = []
