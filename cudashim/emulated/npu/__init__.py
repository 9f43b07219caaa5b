"""The simulated Ascend NPU. `ops`: torch_npu's NPU operators implemented on the CPU."""
