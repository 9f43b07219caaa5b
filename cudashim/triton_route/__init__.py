"""Where Triton launches go on the cpu platform and the simulated NPU."""
