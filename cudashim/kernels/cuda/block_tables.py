"""Decode-metadata block-table copy, TileLang/CUDA: one block per request, all its query rows."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._launch import check_copy_block_tables, launch_copy_block_tables
from ._jit import compile_program, threads_for

__all__ = ["copy_block_tables_tl"]


def _program(max_num_blocks: int, max_seqlen_q: int, fill: int) -> Any:
    import tilelang.language as T

    B = T.dynamic("batch")
    S = T.dynamic("src_width")
    q = max_seqlen_q
    threads = threads_for(q * max_num_blocks, 4, hi=128)

    @T.prim_func
    def copy_block_tables(
        Src: T.Tensor((B, S), T.int32),
        Used: T.Tensor((B,), T.int32),
        Out: T.Tensor((B * q, max_num_blocks), T.int32),
    ):
        with T.Kernel(B, threads=threads) as b:
            n = Used[b]
            for j, i in T.Parallel(q, max_num_blocks):
                Out[b * q + j, i] = T.if_then_else(i < n, Src[b, i], fill)

    return copy_block_tables


@functools.lru_cache(maxsize=None)
def copy_block_tables_tl(max_num_blocks: int, *, max_seqlen_q: int = 1, fill: int = -1) -> Callable[..., Any]:
    """See cudashim.kernels.torch.block_tables.copy_block_tables_tl: same arguments, same results."""
    check_copy_block_tables(max_num_blocks, max_seqlen_q)
    return launch_copy_block_tables(compile_program(_program(max_num_blocks, max_seqlen_q, fill)))

