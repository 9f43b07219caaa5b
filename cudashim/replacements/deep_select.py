"""Drop-in `deep_select.interface.topk`.

One API, two callers: the sampler asks for values (`return_value=True`, the default) and gets
`torch.topk` over the last dim with `indices_type` honoured; the sparse-attention indexer asks for
indices only (`return_value=False`) and gets the real deep_select kernel when it is installed
(`cudashim.original`), else `torch.topk`. Returns `(values or None, indices)`.

When k exceeds the row length the portable path pads indices with -1 (and values with -inf), the
"no key" marker sparse-attention indexers use. Portable path: L3 on cpu (CI); the real-kernel path
is whatever deep_select provides.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from .._state import on_reset
from ..errors import CudashimError

__all__ = ["topk"]

_TARGET = "deep_select.interface:topk"
_UNSET: Any = object()
_real: Any = _UNSET


def _real_kernel() -> Optional[Callable[..., Any]]:
    """The original deep_select topk if its module is installed, looked up once."""
    global _real
    if _real is _UNSET:
        try:
            # through the public API, as any replacement would: this module does not know how it
            # is swapped in (docs/design.md §4's import rules), only that its target may have an original
            import cudashim

            _real = cudashim.original(_TARGET)
        except (ImportError, LookupError, AttributeError, CudashimError):
            _real = None
        if _real is topk:  # never recurse into ourselves
            _real = None
    return _real


def _torch_topk(
    input: torch.Tensor,
    topk: int,
    sorted: bool = False,
    indices_type: torch.dtype = torch.int64,
    return_value: bool = True,
    **_kernel_options: Any,  # tuning knobs of the real kernel mean nothing to torch.topk
) -> tuple[Optional[torch.Tensor], torch.Tensor]:
    k = int(topk)
    n = input.shape[-1]
    values, index = torch.topk(input, min(k, n), dim=-1, sorted=sorted)
    if k > n:
        pad = (*input.shape[:-1], k - n)
        values = torch.cat([values, values.new_full(pad, float("-inf"))], dim=-1)
        index = torch.cat([index, index.new_full(pad, -1)], dim=-1)
    if index.dtype != indices_type:
        index = index.to(indices_type)
    return (values if return_value else None), index


def topk(*args: Any, **kwargs: Any) -> tuple[Optional[torch.Tensor], torch.Tensor]:
    """deep_select's topk(input, topk, *, sorted=False, indices_type=torch.int64, return_value=True, ...)."""
    if kwargs.get("return_value", True):
        return _torch_topk(*args, **kwargs)
    real = _real_kernel()
    if real is not None:
        return real(*args, **kwargs)
    return _torch_topk(*args, **kwargs)


def _reset() -> None:
    global _real
    _real = _UNSET


on_reset(_reset)
