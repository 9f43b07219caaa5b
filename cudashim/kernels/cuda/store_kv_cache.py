"""Paged KV-cache write, TileLang/CUDA: 16-byte vector copies, a few tokens per thread block.

FP8: the row is viewed as (groups, group_size) fragments; a block-wide abs-max reduce per group
gives the UE8M0 exponent (integer ops on amax's bits, see torch/_ue8m0.py), the values are
scaled by the exact power of two and converted with saturation. Scale bytes are written through
a uint8 view of the scale cache, so the container (int32 / int16) is only a view on the host side.
"""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._common import e4m3, ue8m0_byte, ue8m0_exponent, ue8m0_inverse_scale
from .._launch import check_store_kv_cache, launch_store_kv_cache
from ._jit import compile_program, threads_for

__all__ = ["store_kv_cache_tl"]


def _program(row_elems: int, block_size: int, dtype: str, fp8: bool, group_size: int) -> Any:
    import tilelang.language as T

    N = T.dynamic("num_tokens")
    NB = T.dynamic("num_blocks")
    bs = block_size
    threads = threads_for(row_elems, 8)

    if not fp8:
        # Several tokens per block so each thread keeps a few 16-byte loads in flight: a 2 KB row
        # per block alone leaves the memory system under-occupied on H100/H200-class parts.
        tpb = max(1, min(8, 8192 // (row_elems * (4 if dtype == "float32" else 2))))

        @T.prim_func
        def store_kv_cache(
            X: T.Tensor((N, row_elems), dtype),
            Slot: T.Tensor((N,), T.int64),
            Cache: T.Tensor((NB, bs, row_elems), dtype),
        ):
            with T.Kernel(T.ceildiv(N, tpb), threads=threads) as bx:
                for t, i in T.Parallel(tpb, row_elems):
                    tok = bx * tpb + t
                    if tok < N:
                        slot = Slot[tok]
                        if slot >= 0:
                            Cache[slot // bs, slot % bs, i] = X[tok, i]

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
        with T.Kernel(N, threads=threads) as tok:
            slot = Slot[tok]
            if slot >= 0:
                blk = slot // bs
                off = slot % bs
                xf = T.alloc_fragment((ng, g), T.float32)
                amax = T.alloc_fragment((ng,), T.float32)
                inv = T.alloc_fragment((ng,), T.float32)
                for i, j in T.Parallel(ng, g):
                    xf[i, j] = T.cast(X[tok, i * g + j], T.float32)
                T.reduce_absmax(xf, amax, dim=1)
                for i in T.Parallel(ng):
                    e = ue8m0_exponent(T, amax[i])
                    inv[i] = ue8m0_inverse_scale(T, e)
                    SF[blk, off, i] = ue8m0_byte(T, e)
                for i, j in T.Parallel(ng, g):
                    Cache[blk, off, i * g + j] = e4m3(T, xf[i, j], inv[i])

    return store_kv_cache_fp8


@functools.lru_cache(maxsize=None)
def store_kv_cache_tl(
    row_elems: int, block_size: int, *, dtype: str = "bfloat16", fp8: bool = False, group_size: int = 32
) -> Callable[..., None]:
    """See cudashim.kernels.torch.store_kv_cache.store_kv_cache_tl: same arguments, same results."""
    check_store_kv_cache(row_elems, block_size, dtype, fp8, group_size)
    kernel = compile_program(_program(row_elems, block_size, dtype, fp8, group_size))
    return launch_store_kv_cache(kernel, row_elems, block_size, dtype, fp8, group_size)

