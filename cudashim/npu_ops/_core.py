"""One varlen attention problem, executed by the backend the platform calls for.

Every public replacement (flash-attn 2's three functions, flash-attn 4's `_flash_attn_fwd`) turns
its arguments into one `Attn` (described in _attn.py) and `attend()` picks the backend:

- platform ascend  -> `_attn_ascend` (torch_npu fused operators; L0: written against the docs)
- CUDA tensors      -> `_attn_cuda` (PyTorch's flash kernel on packed inputs, no per-sequence loop)
- anything else     -> `_attn_torch` (per-sequence SDPA / exact math; what CPU runs, L3 in CI)
"""

from __future__ import annotations

import warnings
from typing import Optional

import torch

from .._state import on_reset
from ..platform import contract as _platform
from ._attn import Attn, check

__all__ = ["attend", "warn_once"]


_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Performance fallbacks warn once per reason (DESIGN: pure performance paths degrade with one warning)."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def attend(a: Attn) -> tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """Run `a`; returns (out (total_q, Hq, Dv), lse (Hq, total_q) or None, probs (B, Hq, max_q, max_k) or None)."""
    check(a)
    if _platform.platform_name() == "ascend":
        from . import _attn_ascend

        return _attn_ascend.attend(a)
    if a.q.device.type == "cuda" and _platform.platform_name() == "nvidia":  # not the emulated cpu device
        from . import _attn_cuda

        reason = _attn_cuda.why_not(a)
        if reason is None:
            return _attn_cuda.attend(a)
        warn_once(reason, f"{a.api}: {reason}; using the portable per-sequence path (correct, slower)")
    from . import _attn_torch

    return _attn_torch.attend(a)


def _reset() -> None:
    _warned.clear()


on_reset(_reset)
