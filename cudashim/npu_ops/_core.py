"""One varlen attention problem, executed by the backend the platform calls for.

Every public replacement (flash-attn 2's three functions, flash-attn 4's `_flash_attn_fwd`) turns
its arguments into one `Attn` (described in _attn.py) and `attend()` picks the backend:

- platform ascend  -> `_attn_ascend` (torch_npu fused operators; L0: written against the docs)
- CUDA tensors      -> `_attn_cuda` (PyTorch's flash kernel on packed inputs, no per-sequence loop)
- anything else     -> `_attn_torch` (per-sequence SDPA / exact math; what CPU runs, L3 in CI)
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Optional

import torch

from .._state import on_reset
from ..platform import contract as _platform
from ._attn import Attn, check

__all__ = ["attend", "warn_once"]


_warned: set[str] = set()

# Device types whose memory is the host's (the emulated cuda device registers its core's cpu_view at
# install): their attention runs over CPU views of the arguments, PyTorch's CPU operators called
# directly, as a GPU kernel reads device memory, instead of one trip through the device per operator
# (a decode step's attention is about ten operators per sequence and layer).
host_views: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}


def _on_host(a: Attn) -> Optional[Attn]:
    """a over CPU views of its tensors, when nothing needs the device's own operators: no gradient, no
    dropout (the device's generator), no graph capture, no tracing or dispatch mode, plain tensors."""
    view = host_views.get(a.q.device.type)
    if view is None or a.dropout_p > 0:
        return None
    tensors = {f.name: getattr(a, f.name) for f in dataclasses.fields(a) if isinstance(getattr(a, f.name), torch.Tensor)}
    if any(type(t) is not torch.Tensor or t.requires_grad for t in tensors.values()):
        return None
    if (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0
            or torch.cuda.is_current_stream_capturing()):
        return None
    return dataclasses.replace(a, **{name: view(t) if t.device.type == a.q.device.type else t for name, t in tensors.items()})


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
