"""The TileLang kernel library: one factory per kernel, one implementation per backend.

`cuda/` (TileLang, CUDA target), `ascend/` (TileLang `tilelang.ascend`, vector cores) and `torch/`
(plain torch: the numerical oracle and the CPU implementation) are isomorphic packages of `*_tl`
factories. `cudashim.kernels.ops` re-exports the active platform's set. Importing this package
imports nothing heavy: backends import torch on use and tilelang only when a kernel is built.
"""

from __future__ import annotations

__all__ = ["BACKENDS"]

#: every backend package, in the order the dispatcher reports them
BACKENDS: tuple[str, ...] = ("cuda", "ascend", "torch")
