"""Rotary embedding in place, TileLang/CUDA: one thread block per token covering all q and k heads."""

# No `from __future__ import annotations` here: TileLang evaluates the prim_func annotations,
# which name closure variables (dims, dtypes), and string annotations would lose them.

import functools
from typing import Any, Callable

from .._launch import check_rope, launch_rope
from ._jit import compile_program, threads_for

__all__ = ["rope_tl"]


def _program(hq: int, hk: int, head_dim: int, rot: int, is_neox: bool, dtype: str) -> Any:
    import tilelang.language as T

    N = T.dynamic("num_tokens")
    P = T.dynamic("max_position")
    half = rot // 2
    threads = threads_for((hq + hk) * half, 4)

    def pair(i: Any) -> tuple[Any, Any]:
        # neox rotates (i, i + half); GPT-J style rotates adjacent pairs (2i, 2i + 1)
        return (i, i + half) if is_neox else (2 * i, 2 * i + 1)

    @T.prim_func
    def rope(
        Pos: T.Tensor((N,), T.int64),
        Q: T.Tensor((N, hq * head_dim), dtype),
        K: T.Tensor((N, hk * head_dim), dtype),
        CS: T.Tensor((P, rot), T.float32),
    ):
        with T.Kernel(N, threads=threads) as tok:
            pos = Pos[tok]
            for h, i in T.Parallel(hq, half):
                a, b = pair(i)
                xa = T.cast(Q[tok, h * head_dim + a], T.float32)
                xb = T.cast(Q[tok, h * head_dim + b], T.float32)
                Q[tok, h * head_dim + a] = T.cast(xa * CS[pos, i] - xb * CS[pos, half + i], dtype)
                Q[tok, h * head_dim + b] = T.cast(xb * CS[pos, i] + xa * CS[pos, half + i], dtype)
            for h, i in T.Parallel(hk, half):
                a, b = pair(i)
                xa = T.cast(K[tok, h * head_dim + a], T.float32)
                xb = T.cast(K[tok, h * head_dim + b], T.float32)
                K[tok, h * head_dim + a] = T.cast(xa * CS[pos, i] - xb * CS[pos, half + i], dtype)
                K[tok, h * head_dim + b] = T.cast(xb * CS[pos, i] + xa * CS[pos, half + i], dtype)

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
    kernel = compile_program(_program(num_q_heads, num_kv_heads, head_dim, rot, is_neox, dtype))
    return launch_rope(kernel, dtype)

