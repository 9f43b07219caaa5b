"""RMSNorm (+ residual add), tilelang.ascend: weight loaded to UB once per core, rows by DMA, SIMT math."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._launch import check_rms_norm, launch_rms_norm
from ._jit import compile_program, num_vector_cores

__all__ = ["rms_norm_tl"]


def _threads(hidden: int) -> int:
    # ~32 elements per SIMT thread, as the Ascend RMSNorm examples size it
    return 256 if hidden > 4096 else 128


def _program(hidden: int, eps: float, residual: bool, dtype: str, cores: int) -> Any:
    import tilelang.ascend.language as T

    M = T.dynamic("num_rows")
    C = cores
    threads = _threads(hidden)

    if not residual:

        @T.prim_func
        def rms_norm(X: T.Tensor((M, hidden), dtype), W: T.Tensor((hidden,), dtype), Y: T.Tensor((M, hidden), dtype)):
            with T.Kernel(C) as core:
                w_ub = T.alloc_shared((hidden,), dtype)
                x_ub = T.alloc_shared((hidden,), dtype)
                y_ub = T.alloc_shared((hidden,), dtype)
                T.copy(W[0:hidden], w_ub)
                for t in T.Pipelined(T.ceildiv(M - core, C), num_stages=2):
                    row = t * C + core
                    T.copy(X[row, 0:hidden], x_ub)
                    with T.SimtVF(threads=threads):
                        xf = T.alloc_fragment((hidden,), T.float32)
                        sq = T.alloc_fragment((hidden,), T.float32)
                        ss = T.alloc_fragment((1,), T.float32)
                        for i in T.Parallel(hidden):
                            xf[i] = T.cast(x_ub[i], T.float32)
                            sq[i] = xf[i] * xf[i]
                        T.reduce_sum(sq, ss, dim=0)
                        rstd = T.rsqrt(ss[0] / hidden + eps)
                        for i in T.Parallel(hidden):
                            y_ub[i] = T.cast(xf[i] * rstd * T.cast(w_ub[i], T.float32), dtype)
                    T.copy(y_ub, Y[row, 0:hidden])

        return rms_norm

    @T.prim_func
    def rms_norm_residual(
        X: T.Tensor((M, hidden), dtype),
        W: T.Tensor((hidden,), dtype),
        R: T.Tensor((M, hidden), dtype),
        Y: T.Tensor((M, hidden), dtype),
        S: T.Tensor((M, hidden), dtype),
    ):
        with T.Kernel(C) as core:
            w_ub = T.alloc_shared((hidden,), dtype)
            x_ub = T.alloc_shared((hidden,), dtype)
            r_ub = T.alloc_shared((hidden,), dtype)
            y_ub = T.alloc_shared((hidden,), dtype)
            s_ub = T.alloc_shared((hidden,), dtype)
            T.copy(W[0:hidden], w_ub)
            for t in T.Pipelined(T.ceildiv(M - core, C), num_stages=2):
                row = t * C + core
                T.copy(X[row, 0:hidden], x_ub)
                T.copy(R[row, 0:hidden], r_ub)
                with T.SimtVF(threads=threads):
                    sf = T.alloc_fragment((hidden,), T.float32)
                    sq = T.alloc_fragment((hidden,), T.float32)
                    ss = T.alloc_fragment((1,), T.float32)
                    for i in T.Parallel(hidden):
                        # round the sum to dtype first: it is what the next layer reads as its residual
                        s_ub[i] = T.cast(T.cast(x_ub[i], T.float32) + T.cast(r_ub[i], T.float32), dtype)
                    for i in T.Parallel(hidden):
                        sf[i] = T.cast(s_ub[i], T.float32)
                        sq[i] = sf[i] * sf[i]
                    T.reduce_sum(sq, ss, dim=0)
                    rstd = T.rsqrt(ss[0] / hidden + eps)
                    for i in T.Parallel(hidden):
                        y_ub[i] = T.cast(sf[i] * rstd * T.cast(w_ub[i], T.float32), dtype)
                T.copy(s_ub, S[row, 0:hidden])
                T.copy(y_ub, Y[row, 0:hidden])

    return rms_norm_residual


@functools.lru_cache(maxsize=None)
def rms_norm_tl(hidden: int, *, eps: float = 1e-6, residual: bool = False, dtype: str = "bfloat16") -> Callable[..., object]:
    """See cudashim.kernels.torch.norm.rms_norm_tl: same arguments, same results."""
    check_rms_norm(hidden, dtype)
    kernel = compile_program(_program(hidden, float(eps), residual, dtype, num_vector_cores()))
    return launch_rms_norm(kernel, hidden, residual, dtype)

