"""Paged KV-cache write, tilelang.ascend: each vector core walks every num_cores-th token.

bf16: a pure DMA path, GM row -> UB -> the slot's cache row, no vector work. FP8: the row is cast
in a SIMT region (group abs-max, UE8M0 exponent from amax's bits, saturating e4m3 cast) and the
values and scale bytes leave UB by DMA. The scale cache is addressed as bytes, so the same kernel
serves int16 containers (2 scales each, Ascend's fp8_sf_type) and int32 ones.
"""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._common import e4m3, ue8m0_byte, ue8m0_exponent, ue8m0_inverse_scale
from .._launch import check_store_kv_cache, launch_store_kv_cache
from ._jit import compile_program, num_vector_cores

__all__ = ["store_kv_cache_tl"]


def _program(row_elems: int, block_size: int, dtype: str, fp8: bool, group_size: int, cores: int) -> Any:
    import tilelang.ascend.language as T

    N = T.dynamic("num_tokens")
    NB = T.dynamic("num_blocks")
    bs = block_size
    C = cores

    if not fp8:

        @T.prim_func
        def store_kv_cache(
            X: T.Tensor((N, row_elems), dtype),
            Slot: T.Tensor((N,), T.int64),
            Cache: T.Tensor((NB, bs, row_elems), dtype),
        ):
            with T.Kernel(C) as core:
                x_ub = T.alloc_shared((row_elems,), dtype)
                for t in T.Pipelined(T.ceildiv(N - core, C), num_stages=2):
                    tok = t * C + core
                    slot = Slot[tok]
                    if slot >= 0:
                        T.copy(X[tok, 0:row_elems], x_ub)
                        T.copy(x_ub, Cache[slot // bs, slot % bs, 0:row_elems])

        return store_kv_cache

    g = group_size
    ng = row_elems // g

    @T.prim_func
    def store_kv_cache_fp8(
        X: T.Tensor((N, row_elems), dtype),
        Slot: T.Tensor((N,), T.int64),
        Cache: T.Tensor((NB, bs, row_elems), T.float8_e4m3fn),
        SF: T.Tensor((NB, bs, ng), T.uint8),
    ):
        with T.Kernel(C) as core:
            x_ub = T.alloc_shared((row_elems,), dtype)
            q_ub = T.alloc_shared((row_elems,), T.float8_e4m3fn)
            sf_ub = T.alloc_shared((ng,), T.uint8)
            for t in T.Pipelined(T.ceildiv(N - core, C), num_stages=2):
                tok = t * C + core
                slot = Slot[tok]
                if slot >= 0:
                    T.copy(X[tok, 0:row_elems], x_ub)
                    with T.SimtVF(threads=128):
                        xf = T.alloc_fragment((ng, g), T.float32)
                        amax = T.alloc_fragment((ng,), T.float32)
                        for i, j in T.Parallel(ng, g):
                            xf[i, j] = T.cast(x_ub[i * g + j], T.float32)
                        T.reduce_absmax(xf, amax, dim=1)
                        for i, j in T.Parallel(ng, g):
                            q_ub[i * g + j] = e4m3(T, xf[i, j], ue8m0_inverse_scale(T, ue8m0_exponent(T, amax[i])))
                        for i in T.Parallel(ng):
                            sf_ub[i] = ue8m0_byte(T, ue8m0_exponent(T, amax[i]))
                    T.copy(q_ub, Cache[slot // bs, slot % bs, 0:row_elems])
                    T.copy(sf_ub, SF[slot // bs, slot % bs, 0:ng])

    return store_kv_cache_fp8


@functools.lru_cache(maxsize=None)
def store_kv_cache_tl(
    row_elems: int, block_size: int, *, dtype: str = "bfloat16", fp8: bool = False, group_size: int = 32
) -> Callable[..., None]:
    """See cudashim.kernels.torch.store_kv_cache.store_kv_cache_tl: same arguments, same results."""
    check_store_kv_cache(row_elems, block_size, dtype, fp8, group_size)
    kernel = compile_program(_program(row_elems, block_size, dtype, fp8, group_size, num_vector_cores()))
    return launch_store_kv_cache(kernel, row_elems, block_size, dtype, fp8, group_size)

