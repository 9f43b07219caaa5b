"""RMSNorm (+ residual add), TileLang/CUDA: one thread block per row, the row held in registers."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._launch import check_rms_norm, launch_rms_norm
from ._jit import compile_program, threads_for

__all__ = ["rms_norm_tl"]


def _program(hidden: int, eps: float, residual: bool, dtype: str) -> Any:
    import tilelang.language as T

    M = T.dynamic("num_rows")
    threads = threads_for(hidden, 16, hi=512)

    if not residual:

        @T.prim_func
        def rms_norm(X: T.Tensor((M, hidden), dtype), W: T.Tensor((hidden,), dtype), Y: T.Tensor((M, hidden), dtype)):
            with T.Kernel(M, threads=threads) as row:
                xf = T.alloc_fragment((hidden,), T.float32)
                sq = T.alloc_fragment((hidden,), T.float32)
                ss = T.alloc_fragment((1,), T.float32)
                for i in T.Parallel(hidden):
                    xf[i] = T.cast(X[row, i], T.float32)
                    sq[i] = xf[i] * xf[i]
                T.reduce_sum(sq, ss, dim=0)
                rstd = T.rsqrt(ss[0] / hidden + eps)
                for i in T.Parallel(hidden):
                    Y[row, i] = T.cast(xf[i] * rstd * T.cast(W[i], T.float32), dtype)

        return rms_norm

    @T.prim_func
    def rms_norm_residual(
        X: T.Tensor((M, hidden), dtype),
        W: T.Tensor((hidden,), dtype),
        R: T.Tensor((M, hidden), dtype),
        Y: T.Tensor((M, hidden), dtype),
        S: T.Tensor((M, hidden), dtype),
    ):
        with T.Kernel(M, threads=threads) as row:
            sf = T.alloc_fragment((hidden,), T.float32)
            sq = T.alloc_fragment((hidden,), T.float32)
            ss = T.alloc_fragment((1,), T.float32)
            for i in T.Parallel(hidden):
                # round the sum to dtype first: it is what the next layer reads as its residual
                s = T.cast(T.cast(X[row, i], T.float32) + T.cast(R[row, i], T.float32), dtype)
                S[row, i] = s
                sf[i] = T.cast(s, T.float32)
                sq[i] = sf[i] * sf[i]
            T.reduce_sum(sq, ss, dim=0)
            rstd = T.rsqrt(ss[0] / hidden + eps)
            for i in T.Parallel(hidden):
                Y[row, i] = T.cast(sf[i] * rstd * T.cast(W[i], T.float32), dtype)

    return rms_norm_residual


@functools.lru_cache(maxsize=None)
def rms_norm_tl(hidden: int, *, eps: float = 1e-6, residual: bool = False, dtype: str = "bfloat16") -> Callable[..., object]:
    """See cudashim.kernels.torch.norm.rms_norm_tl: same arguments, same results."""
    check_rms_norm(hidden, dtype)
    kernel = compile_program(_program(hidden, float(eps), residual, dtype))
    return launch_rms_norm(kernel, hidden, residual, dtype)

