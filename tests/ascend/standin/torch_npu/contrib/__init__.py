"""Stand-in for torch_npu.contrib (the real one imports native fused ops); transfer_to_npu.py is real."""
