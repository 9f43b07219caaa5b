"""What the two fused attention operators compute, once: the masks each sparse_mode means and the softmax.

Shared by `ops.npu_fusion_attention` and `ops.npu_fused_infer_attention_score` (CPU implementations of
the documented semantics, the simulated NPU's operators). Sources, cited where a rule is used:

[FA]  torch_npu.npu_fusion_attention — torch-npu 2.13.0 wheel, torch_npu/_op_plugin_docs.py; the same
      text online: https://hiascend.com/document/detail/zh/Pytorch/600/apiref/apilist/ptaoplist_000850.html
[FIA] torch_npu.npu_fused_infer_attention_score — same wheel file; online:
      https://www.hiascend.com/document/detail/zh/Pytorch/700/apiref/apilist/ptaoplist_001232.html
[META] output shapes: torch_npu/op_plugin/meta/_meta_registrations.py of the same wheel (read, not copied).

Row/column convention: query row i (0-based, within one sequence of Sq rows), key column j (within Skv).
A band [lo, hi] around a diagonal keeps j with d - pre <= j <= d + next, d = i + origin offset.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from ...errors import CudashimError

__all__ = ["NpuOperatorError", "INT_MAX", "band", "check_compressed_mask", "attend_one", "host", "int_list"]

INT_MAX = 2147483647


class NpuOperatorError(CudashimError, ValueError):
    """A call the documented operator refuses (or leaves undefined); the message names the argument and the fix."""


def band(sq: int, skv: int, pre: int, nxt: int, *, bottom_right: bool) -> torch.Tensor:
    """(Sq, Skv) bool, True = computed: keys within pre before and nxt after the diagonal.

    sparse_mode 3/4 count from the bottom-right corner ([FA]: "参数起点为右下角"): the diagonal is shifted
    by Skv - Sq. sparse_mode 0 gives no origin in words; we read top-left, the only reading both docs
    support: [FA]'s own reference builds the mode-0 mask as triu(k=next+1) + tril(k=-pre-1), and [FIA]'s
    int8-output rule says a mode-0 row is empty when "actual_seq_lengths-actual_seq_lengths_kv-pre_tokens>0
    或next_tokens<0", true only with the diagonal at the top-left (for mode 4 it says
    "next_tokens+actual_seq_lengths_kv-actual_seq_lengths<0": bottom-right, as we do).
    """
    off = (skv - sq) if bottom_right else 0
    d = torch.arange(sq, dtype=torch.int64).view(-1, 1) + off
    j = torch.arange(skv, dtype=torch.int64).view(1, -1)
    return (j >= d - int(pre)) & (j <= d + int(nxt))


def host(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The operators compute on the CPU; a tensor on the simulated NPU (host memory) is read through a copy."""
    return t if t is None or t.device.type == "cpu" else t.cpu()


def int_list(op: str, name: str, value: object) -> Optional[list[int]]:
    """A host int list from a list/tuple or a 1-D tensor (the docs type them int[] / SymInt[])."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        if value.dim() != 1 or value.is_floating_point():
            raise NpuOperatorError(f"{op}: {name} must be a 1-D integer list or tensor, got {tuple(value.shape)} "
                                   f"{value.dtype}")
        return [int(x) for x in value.tolist()]
    try:
        return [int(x) for x in value]  # type: ignore[union-attr]
    except TypeError:
        raise NpuOperatorError(f"{op}: {name} must be a list of ints, got {type(value).__name__}") from None


_COMPRESSED = 2048


def check_compressed_mask(mask: Optional[torch.Tensor], op: str, sparse_mode: int) -> None:
    """sparse_mode 2/3/4 take the optimised 2048x2048 lower-triangular mask ([FA], [FIA]: 优化后的压缩下三角矩阵).

    The mask only tells the kernel the pattern; the real operator trusts the caller ("需要用户保证传入的
    atten_mask为下三角"), a wrong one gives wrong numbers there. The simulator refuses it instead.
    """
    if mask is None:
        raise NpuOperatorError(
            f"{op}: sparse_mode={sparse_mode} needs atten_mask, the compressed (2048, 2048) mask "
            "torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)")
    m = mask
    while m.dim() > 2 and m.shape[0] == 1:
        m = m[0]
    want = torch.triu(torch.ones(_COMPRESSED, _COMPRESSED, dtype=torch.bool), diagonal=1)
    if tuple(m.shape) != (_COMPRESSED, _COMPRESSED) or not torch.equal(m.detach().cpu() != 0, want):
        raise NpuOperatorError(
            f"{op}: sparse_mode={sparse_mode} takes atten_mask as the compressed lower-triangular (2048, 2048) "
            f"mask (True strictly above the diagonal), got shape {tuple(mask.shape)} with other contents; pass "
            "torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1), or sparse_mode=0/1 for a full mask")


def attend_one(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, allowed: torch.Tensor,
    keep_prob: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One sequence: q (Sq, Nq, D), k (Skv, Nkv, D), v (Skv, Nkv, Dv); allowed broadcasts to (Nq, Sq, Skv).

    Returns float32 out (Sq, Nq, Dv), row max, row sum, lse (each (Nq, Sq)).
    The formula of [FA]/[FIA]: softmax(scale * Q K^T, masked) V, computed in float32 as the operators
    accumulate. GQA: the docs require Nq % Nkv == 0 but do not spell out which query heads share a KV
    head; query head h reads KV head h // (Nq / Nkv), the grouping every GQA model (and flash-attn) uses.
    Rows with no key at all: the docs leave them undefined unless the row-invalid fix is on ([FA]
    inner_precise: "如果算子可判断出存在无效行场景, 会自动使能无效行计算, 例如sparse_mode为3, Sq > Skv");
    we return 0 for out (what that fix produces: no key contributes) and -inf for max and lse
    (log of an empty sum), and say so here rather than invent a value.
    """
    nq, nkv = q.shape[1], k.shape[1]
    group = nq // nkv
    qf, kf, vf = q.float(), k.float(), v.float()
    if group > 1:
        kf = kf.repeat_interleave(group, dim=1)
        vf = vf.repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", qf, kf) * float(scale)
    s = s.masked_fill(~allowed, -math.inf)
    # a sequence with no key at all (actual_seq_lengths_kv 0) is a row with every key masked
    row_max = s.amax(dim=-1) if s.shape[-1] else torch.full(s.shape[:-1], -math.inf)
    safe_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    p = torch.exp(s - safe_max.unsqueeze(-1))  # exp(-inf) = 0 for masked keys
    row_sum = p.sum(dim=-1)
    probs = p / row_sum.clamp_min(torch.finfo(torch.float32).tiny).unsqueeze(-1)
    if keep_prob < 1.0:
        # [FA] Dropout(y) with keep_prob = share kept. The NPU draws its mask with Philox on the device;
        # this draws from torch's CPU generator, so the kept positions differ, the distribution does not.
        probs = probs * torch.bernoulli(torch.full_like(probs, keep_prob)) / keep_prob
    out = torch.einsum("hqk,khd->qhd", probs, vf)
    lse = torch.where(row_sum > 0, safe_max + torch.log(row_sum), torch.full_like(row_sum, -math.inf))
    return out, row_max, row_sum, lse
