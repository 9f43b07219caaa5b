"""RMSNorm, with the optional fused residual add of LLM decoder layers."""

from __future__ import annotations

import functools
from typing import Callable

import torch

from .._launch import check_dtype_of, check_residual, check_rms_norm

__all__ = ["rms_norm_tl"]


@functools.lru_cache(maxsize=None)
def rms_norm_tl(hidden: int, *, eps: float = 1e-6, residual: bool = False, dtype: str = "bfloat16") -> Callable[..., object]:
    """A kernel `(x, weight, residual=None) -> y`, or `-> (y, x + residual)` when built with residual.

    Static: `hidden`, `eps`, `residual`, `dtype`. Dynamic: x `(..., hidden)`, weight `(hidden,)`,
    residual like x. With residual the sum is rounded to dtype first (it is what the next layer
    reads) and y = sum * rsqrt(mean(sum^2) + eps) * weight, all in float32, rounded once.
    """
    check_rms_norm(hidden, dtype)
    want = getattr(torch, dtype)

    def norm(x: torch.Tensor, weight: torch.Tensor, res: torch.Tensor | None = None):
        check_dtype_of("rms_norm_tl", want, x=x)
        check_residual(residual, res)
        if residual:
            x = (x.float() + res.float()).to(want)
        xf = x.float()
        rstd = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
        y = (xf * rstd * weight.float()).to(want)
        return (y, x) if residual else y

    return norm
