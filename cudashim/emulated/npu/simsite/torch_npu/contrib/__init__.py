"""torch_npu.contrib of the simulated torch_npu: transfer_to_npu.py and apis_config.json here are the wheel's."""
