"""Python side of the emulated devices (DESIGN.md §4): the cuda device on the CPU, the simulated Ascend NPU."""
