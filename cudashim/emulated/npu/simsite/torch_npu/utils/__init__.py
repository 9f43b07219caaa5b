"""torch_npu.utils of the simulated torch_npu (the real package imports the NPU runtime)."""
