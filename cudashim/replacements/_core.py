"""One varlen attention problem, executed by the backend the platform calls for.

Every public replacement (flash-attn 2's three functions, flash-attn 4's `_flash_attn_fwd`) turns
its arguments into one `Attn` (described in _attn.py) and `attend()` picks the backend:

- platform ascend  -> `_attn_ascend` (torch_npu fused operators; L0: written against the docs)
- CUDA tensors      -> `_attn_cuda` (PyTorch's flash kernel on packed inputs, no per-sequence loop)
- anything else     -> `_attn_torch` (per-sequence SDPA / exact math; what CPU runs, L3 in CI)
"""

from __future__ import annotations

import copy
import warnings
from typing import Optional

import torch

from .._state import on_reset
from ..platform import contract as _platform
from ..platform.cpu_views import on_host
from ._attn import Attn, check

__all__ = ["attend", "warn_once"]


_warned: set[str] = set()


# the fields of an Attn that may hold tensors, q first (its device decides)
_TENSOR_FIELDS = ("q", "k", "v", "cu_q", "cu_k", "seqused_k", "block_table", "alibi_slopes")


def _on_host(a: Attn) -> Optional[Attn]:
    """a over CPU views of its tensors where the device's memory is the host's (platform.cpu_views);
    not with dropout, which draws from the device's generator."""
    if a.dropout_p > 0:
        return None
    host = on_host(*(getattr(a, n) for n in _TENSOR_FIELDS))
    if host is None:
        return None
    viewed = copy.copy(a)
    viewed.__dict__.update(zip(_TENSOR_FIELDS, host))
    return viewed


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

    host = _on_host(a)
    if host is not None:  # the results, computed on the host, become the device's
        return tuple(None if t is None else t.to(a.q.device) for t in _attn_torch.attend(host))  # type: ignore[return-value]
    return _attn_torch.attend(a)


def _reset() -> None:
    _warned.clear()


on_reset(_reset)
