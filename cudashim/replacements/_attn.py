"""One varlen attention problem, described once: the `Attn` every replacement builds and every backend runs.

flash-attn's own varlen form: packed queries with `cu_q`, keys either packed (`cu_k` start offsets)
or paged (`block_table`), and per-sequence key lengths `seqused_k`. Here rather than beside
`attend()` (in _core) so the backends, which _core picks between, import the description and
not the module that imports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from ..errors import CapabilityError

__all__ = ["Attn", "unsupported", "normalize_window", "check"]


@dataclass
class Attn:
    """A varlen attention call in flash-attn's own terms (see module docstring)."""

    api: str                                  # the public API being served, for messages
    q: torch.Tensor                           # (total_q, Hq, D)
    k: torch.Tensor                           # (total_k, Hk, D) or paged (num_blocks, block_size, Hk, D)
    v: torch.Tensor                           # like k, last dim Dv
    cu_q: torch.Tensor                        # (B+1,) int32
    max_q: int
    max_k: int                                # an upper bound is fine
    cu_k: Optional[torch.Tensor] = None       # (B+1,) start offsets into packed k; None when paged
    seqused_k: Optional[torch.Tensor] = None  # (B,) keys used per sequence; None: diff(cu_k)
    block_table: Optional[torch.Tensor] = None
    scale: float = 0.0
    causal: bool = False
    window: tuple[int, int] = (-1, -1)        # flash-attn's (left, right); -1 = unbounded
    softcap: float = 0.0
    alibi_slopes: Optional[torch.Tensor] = None  # (Hq,) or (B, Hq)
    dropout_p: float = 0.0
    want_lse: bool = False
    want_probs: bool = False
    num_splits: int = 0
    kind: str = "varlen"                      # "varlen" | "dense" (flash_attn_func) | "kvcache"
    q_len: int = 0                            # queries per sequence for "dense"/"kvcache" (uniform)

    @property
    def paged(self) -> bool:
        return self.block_table is not None

    @property
    def batch(self) -> int:
        return self.cu_q.numel() - 1

    def key_lengths(self) -> torch.Tensor:
        if self.seqused_k is not None:
            return self.seqused_k
        assert self.cu_k is not None
        return self.cu_k[1:] - self.cu_k[:-1]


def unsupported(api: str, argument: str, path: str, fix: str) -> CapabilityError:
    """The error for an argument a path cannot honour: names the API, the argument, the path and the fix."""
    return CapabilityError(f"{api}: argument {argument} is not supported on the {path} path; {fix}")


def normalize_window(window_size: tuple[int, int] | list[int] | None, causal: bool) -> tuple[int, int]:
    """flash-attn's window with causal folded in (causal means right edge 0); -1 stays 'unbounded'."""
    left, right = (-1, -1) if window_size is None else (int(window_size[0]), int(window_size[1]))
    left = -1 if left < 0 else left
    right = -1 if right < 0 else right
    if causal:
        right = 0
    return left, right


def check(a: Attn) -> None:
    """Shape checks flash-attn makes, with messages that name the argument."""
    hq = a.q.shape[-2]
    hk = a.k.shape[-2]
    if a.paged and a.k.dim() != 4:
        raise ValueError(f"{a.api}: with block_table, k/v must be the paged cache (num_blocks, block_size, "
                         f"nheads_k, headdim), got k of shape {tuple(a.k.shape)}")
    if a.q.shape[-1] != a.k.shape[-1]:
        raise ValueError(f"{a.api}: q head_dim {a.q.shape[-1]} != k head_dim {a.k.shape[-1]}")
    if hk == 0 or hq % hk:
        raise ValueError(f"{a.api}: number of q heads ({hq}) must be a multiple of k/v heads ({hk}) for MQA/GQA")
    if a.k.shape[:-1] != a.v.shape[:-1]:
        raise ValueError(f"{a.api}: k {tuple(a.k.shape)} and v {tuple(a.v.shape)} disagree")
    if a.alibi_slopes is not None and a.alibi_slopes.shape[-1] != hq:
        raise ValueError(f"{a.api}: alibi_slopes must be (nheads,) or (batch, nheads) with nheads={hq}")
    if not a.scale or not math.isfinite(a.scale):
        raise ValueError(f"{a.api}: softmax_scale must be a finite non-zero float, got {a.scale!r}")
