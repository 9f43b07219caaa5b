"""The simulated Ascend NPU (issue 19). `ops`: torch_npu's NPU operators implemented on the CPU."""
