"""Per-token-group FP8-e4m3 cast with UE8M0 scales, tilelang.ascend: group 32 only.

Ascend's cast kernel is built for 32-element groups (one scale per 32 values, the MX block). Other
group sizes are served by the torch reference on the NPU, as the capability table's
`per_token_cast_granularity` entry says (emulated, slower, same bytes); they are not refused.
"""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._common import e4m3, ue8m0_byte, ue8m0_exponent, ue8m0_inverse_scale
from .._launch import check_per_token_cast, launch_per_token_cast
from ._jit import compile_program, num_vector_cores

__all__ = ["per_token_cast_tl", "NATIVE_GROUP_SIZES"]

#: group sizes with a native Ascend kernel; the rest route to cudashim.kernels.torch.quant
NATIVE_GROUP_SIZES = (32,)


def _program(hidden: int, group_size: int, dtype: str, cores: int) -> Any:
    import tilelang.ascend.language as T

    M = T.dynamic("num_rows")
    g = group_size
    ng = hidden // g
    C = cores

    @T.prim_func
    def per_token_cast(
        X: T.Tensor((M, hidden), dtype),
        Q: T.Tensor((M, hidden), T.float8_e4m3fn),
        SF: T.Tensor((M, ng), T.uint8),
    ):
        with T.Kernel(C) as core:
            x_ub = T.alloc_shared((hidden,), dtype)
            q_ub = T.alloc_shared((hidden,), T.float8_e4m3fn)
            sf_ub = T.alloc_shared((ng,), T.uint8)
            for t in T.Pipelined(T.ceildiv(M - core, C), num_stages=2):
                row = t * C + core
                T.copy(X[row, 0:hidden], x_ub)
                with T.SimtVF(threads=256 if hidden > 4096 else 128):
                    xf = T.alloc_fragment((ng, g), T.float32)
                    amax = T.alloc_fragment((ng,), T.float32)
                    for i, j in T.Parallel(ng, g):
                        xf[i, j] = T.cast(x_ub[i * g + j], T.float32)
                    T.reduce_absmax(xf, amax, dim=1)
                    for i, j in T.Parallel(ng, g):
                        q_ub[i * g + j] = e4m3(T, xf[i, j], ue8m0_inverse_scale(T, ue8m0_exponent(T, amax[i])))
                    for i in T.Parallel(ng):
                        sf_ub[i] = ue8m0_byte(T, ue8m0_exponent(T, amax[i]))
                T.copy(q_ub, Q[row, 0:hidden])
                T.copy(sf_ub, SF[row, 0:ng])

    return per_token_cast


@functools.lru_cache(maxsize=None)
def per_token_cast_tl(
    hidden: int, *, group_size: int = 128, dtype: str = "bfloat16", sf_dtype: str | None = None
) -> Callable[[Any], tuple[Any, Any]]:
    """See cudashim.kernels.torch.quant.per_token_cast_tl; group sizes other than 32 run the torch path."""
    sf_name = check_per_token_cast(hidden, group_size, dtype, sf_dtype)
    if group_size not in NATIVE_GROUP_SIZES:
        return _torch_path(hidden, group_size, dtype, sf_name)
    kernel = compile_program(_program(hidden, group_size, dtype, num_vector_cores()))
    return launch_per_token_cast(kernel, hidden, group_size, dtype, sf_name)


def _torch_path(hidden: int, group_size: int, dtype: str, sf_name: str) -> Callable[[Any], tuple[Any, Any]]:
    # The capability table marks non-g32 casts on ascend as emulated with one warning: same bytes,
    # slower path. Asking it (rather than hard-coding the warning) keeps the table the one truth.
    from ...platform import capabilities
    from ..torch.quant import per_token_cast_tl as reference

    api = f"cudashim.kernels.ops.per_token_cast_tl(group_size={group_size})"
    capabilities.require("per_token_cast_granularity", platform="ascend", api=api)
    return reference(hidden, group_size=group_size, dtype=dtype, sf_dtype=sf_name)
