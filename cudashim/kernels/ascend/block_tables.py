"""Decode-metadata block-table copy, tilelang.ascend: one request per core step, row built in UB."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._launch import check_copy_block_tables, launch_copy_block_tables
from ._jit import compile_program, num_vector_cores

__all__ = ["copy_block_tables_tl"]


def _program(max_num_blocks: int, max_seqlen_q: int, fill: int, cores: int) -> Any:
    import tilelang.ascend.language as T

    B = T.dynamic("batch")
    S = T.dynamic("src_width")
    q = max_seqlen_q
    nb = max_num_blocks
    C = cores

    @T.prim_func
    def copy_block_tables(
        Src: T.Tensor((B, S), T.int32),
        Used: T.Tensor((B,), T.int32),
        Out: T.Tensor((B * q, nb), T.int32),
    ):
        with T.Kernel(C) as core:
            src_ub = T.alloc_shared((nb,), T.int32)
            out_ub = T.alloc_shared((nb,), T.int32)
            for t in T.Pipelined(T.ceildiv(B - core, C), num_stages=2):
                b = t * C + core
                n = Used[b]
                # src is at least max_num_blocks wide (the kernel's contract), so one DMA covers the row
                T.copy(Src[b, 0:nb], src_ub)
                with T.SimtVF(threads=64):
                    for i in T.Parallel(nb):
                        out_ub[i] = T.if_then_else(i < n, src_ub[i], fill)
                for j in T.serial(q):
                    T.copy(out_ub, Out[b * q + j, 0:nb])

    return copy_block_tables


@functools.lru_cache(maxsize=None)
def copy_block_tables_tl(max_num_blocks: int, *, max_seqlen_q: int = 1, fill: int = -1) -> Callable[..., Any]:
    """See cudashim.kernels.torch.block_tables.copy_block_tables_tl: same arguments, same results."""
    check_copy_block_tables(max_num_blocks, max_seqlen_q)
    return launch_copy_block_tables(compile_program(_program(max_num_blocks, max_seqlen_q, fill, num_vector_cores())))

