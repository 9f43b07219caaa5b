"""TileLang kernels for Ascend 950 (`tilelang.ascend`): the vector-core model.

`T.Kernel(num_cores)` is a 1-D grid of AI vector cores, each walking its share of rows
persistently; data moves GM -> UB (Unified Buffer, `T.alloc_shared`) -> GM by DMA (`T.copy`),
and arithmetic runs on UB data inside `T.SimtVF` regions. The row loops are `T.Pipelined(...,
num_stages=2)`: UB buffers are double-buffered so the next row's load overlaps this row's work. Each module mirrors its `cuda/`
namesake: same factory, same arguments, same results. Verified here only to level L2 (lowered to
AscendC source in CI); see cudashim/kernels/README.md for what that does and does not prove.
"""
