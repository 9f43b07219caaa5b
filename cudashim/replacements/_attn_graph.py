"""Paged decode attention with no host synchronization and no data-dependent shape, for CUDA graph
capture on the emulated device.

The general torch path reads cu_seqlens / seqused on the host (.tolist()), which a capture refuses
as CUDA does. Here every sequence attends over its whole block-table row (max_blocks * block_size
keys), keys at or past its length masked out, so the shapes depend only on the tensors' shapes and a
replay serves any lengths up to the table's capacity. Scores and softmax in float32, as flash-attn.
"""

from __future__ import annotations

from typing import Optional

import torch

__all__ = ["paged_decode"]


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                 seqused: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """q (B, 1, Hq, D) over caches (blocks, block_size, Hk, D) -> (out (B, 1, Hq, Dv), lse (B, Hq))."""
    b, _, hq, d = q.shape
    hk = k_cache.shape[2]
    rows = block_table.long().clamp(min=0).reshape(-1)  # -1 pads unused table entries; masked below
    k = k_cache.index_select(0, rows).reshape(b, -1, hk, d).float()
    v = v_cache.index_select(0, rows).reshape(b, k.shape[1], hk, -1).float()
    qf = q.reshape(b, hk, hq // hk, d).float()  # query head h reads kv head h // (Hq / Hk)
    s = torch.einsum("bkgd,blkd->bkgl", qf, k) * scale
    past = torch.arange(k.shape[1], device=q.device)[None, :] >= seqused.long()[:, None]  # (B, L)
    s = s.masked_fill(past[:, None, None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.einsum("bkgl,blkd->bkgd", torch.softmax(s, dim=-1), v)
    return o.reshape(b, 1, hq, -1).to(q.dtype), lse.reshape(b, hq)


def capturing(q: torch.Tensor) -> Optional[bool]:
    """True while a CUDA graph captures on q's device type (cuda only)."""
    return q.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
