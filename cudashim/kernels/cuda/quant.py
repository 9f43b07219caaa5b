"""Per-token-group FP8-e4m3 cast with UE8M0 scales, TileLang/CUDA: one block per row, groups 32/64/128."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._common import e4m3, ue8m0_byte, ue8m0_exponent, ue8m0_inverse_scale
from .._launch import check_per_token_cast, launch_per_token_cast
from ._jit import compile_program, threads_for

__all__ = ["per_token_cast_tl"]


def _program(hidden: int, group_size: int, dtype: str) -> Any:
    import tilelang.language as T

    M = T.dynamic("num_rows")
    g = group_size
    ng = hidden // g
    threads = threads_for(hidden, 8)

    @T.prim_func
    def per_token_cast(
        X: T.Tensor((M, hidden), dtype),
        Q: T.Tensor((M, hidden), T.float8_e4m3fn),
        SF: T.Tensor((M, ng), T.uint8),
    ):
        with T.Kernel(M, threads=threads) as row:
            xf = T.alloc_fragment((ng, g), T.float32)
            amax = T.alloc_fragment((ng,), T.float32)
            inv = T.alloc_fragment((ng,), T.float32)
            for i, j in T.Parallel(ng, g):
                xf[i, j] = T.cast(X[row, i * g + j], T.float32)
            T.reduce_absmax(xf, amax, dim=1)
            for i in T.Parallel(ng):
                e = ue8m0_exponent(T, amax[i])
                inv[i] = ue8m0_inverse_scale(T, e)
                SF[row, i] = ue8m0_byte(T, e)
            for i, j in T.Parallel(ng, g):
                Q[row, i * g + j] = e4m3(T, xf[i, j], inv[i])

    return per_token_cast


@functools.lru_cache(maxsize=None)
def per_token_cast_tl(
    hidden: int, *, group_size: int = 128, dtype: str = "bfloat16", sf_dtype: str | None = None
) -> Callable[[Any], tuple[Any, Any]]:
    """See cudashim.kernels.torch.quant.per_token_cast_tl: same arguments, same results."""
    sf_name = check_per_token_cast(hidden, group_size, dtype, sf_dtype)
    kernel = compile_program(_program(hidden, group_size, dtype))
    return launch_per_token_cast(kernel, hidden, group_size, dtype, sf_name)

