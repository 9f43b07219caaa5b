"""torch_npu.utils._dynamo stand-in: the real one registers NPU device interfaces with Dynamo."""
