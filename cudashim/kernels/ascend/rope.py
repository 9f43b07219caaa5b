"""Rotary embedding in place, tilelang.ascend: per token, q/k rows and the cos/sin row into UB, SIMT rotate."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._launch import check_rope, launch_rope
from ._jit import compile_program, num_vector_cores

__all__ = ["rope_tl"]


def _program(hq: int, hk: int, head_dim: int, rot: int, is_neox: bool, dtype: str, cores: int) -> Any:
    import tilelang.ascend.language as T

    N = T.dynamic("num_tokens")
    P = T.dynamic("max_position")
    half = rot // 2
    C = cores
    qw, kw = hq * head_dim, hk * head_dim

    def pair(i: Any) -> tuple[Any, Any]:
        # neox rotates (i, i + half); GPT-J style rotates adjacent pairs (2i, 2i + 1)
        return (i, i + half) if is_neox else (2 * i, 2 * i + 1)

    @T.prim_func
    def rope(
        Pos: T.Tensor((N,), T.int64),
        Q: T.Tensor((N, qw), dtype),
        K: T.Tensor((N, kw), dtype),
        CS: T.Tensor((P, rot), T.float32),
    ):
        with T.Kernel(C) as core:
            q_ub = T.alloc_shared((qw,), dtype)
            k_ub = T.alloc_shared((kw,), dtype)
            cs_ub = T.alloc_shared((rot,), T.float32)
            for t in T.Pipelined(T.ceildiv(N - core, C), num_stages=2):
                tok = t * C + core
                pos = Pos[tok]
                T.copy(Q[tok, 0:qw], q_ub)
                T.copy(K[tok, 0:kw], k_ub)
                T.copy(CS[pos, 0:rot], cs_ub)
                with T.SimtVF(threads=128):
                    for h, i in T.Parallel(hq, half):
                        a, b = pair(i)
                        xa = T.cast(q_ub[h * head_dim + a], T.float32)
                        xb = T.cast(q_ub[h * head_dim + b], T.float32)
                        q_ub[h * head_dim + a] = T.cast(xa * cs_ub[i] - xb * cs_ub[half + i], dtype)
                        q_ub[h * head_dim + b] = T.cast(xb * cs_ub[i] + xa * cs_ub[half + i], dtype)
                    for h, i in T.Parallel(hk, half):
                        a, b = pair(i)
                        xa = T.cast(k_ub[h * head_dim + a], T.float32)
                        xb = T.cast(k_ub[h * head_dim + b], T.float32)
                        k_ub[h * head_dim + a] = T.cast(xa * cs_ub[i] - xb * cs_ub[half + i], dtype)
                        k_ub[h * head_dim + b] = T.cast(xb * cs_ub[i] + xa * cs_ub[half + i], dtype)
                T.copy(q_ub, Q[tok, 0:qw])
                T.copy(k_ub, K[tok, 0:kw])

    return rope


@functools.lru_cache(maxsize=None)
def rope_tl(
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    *,
    rotary_dim: int | None = None,
    is_neox: bool = True,
    dtype: str = "bfloat16",
) -> Callable[..., tuple[Any, Any]]:
    """See cudashim.kernels.torch.rope.rope_tl: same arguments, same results."""
    rot = check_rope(num_q_heads, num_kv_heads, head_dim, rotary_dim, dtype)
    kernel = compile_program(_program(num_q_heads, num_kv_heads, head_dim, rot, is_neox, dtype, num_vector_cores()))
    return launch_rope(kernel, dtype)

