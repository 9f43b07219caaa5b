"""TileLang kernels for the CUDA target (sm_80+; built and checked for sm_90 in CI, run on an NVIDIA GPU by tests/gpu).

Each module builds a TileLang program from the static arguments (`_program`) and compiles it once
per static-argument set; the factory returns the shared launcher (cudashim.kernels._launch) that
views the caller's tensors into the program's shapes. Dynamic sizes (tokens, cache blocks) are
symbolic, so one compiled kernel serves every batch.
"""
