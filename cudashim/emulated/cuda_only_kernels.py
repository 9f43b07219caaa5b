"""CUDA's fused attention operators on the emulated cuda device, written with the device's own operators
(cuda_only.py registers them for the CUDA key; its docstring says why they are built this way).

Shapes as CUDA's kernels take and give them (and as their meta functions state):
  flash:     q (B, Lq, H, D) dense or (total_q, H, D) with cum_seq_q; k, v likewise (Hk heads, Hk | H).
             log-sum-exp (B, H, Lq) dense, (H, total_q) variable-length; rng_state (2,) uint64, unused ().
             Causal masks and windows are aligned to the bottom right (flash attention 2's rule).
  efficient: q (B, M, H, K); cu_seqlens as flash's with B == 1; custom_mask_type 0 none, 1 causal from
             the top left, 2 from the bottom right; log-sum-exp (B or sequences, H, M rounded up to 32)
             when asked, else (…, 0); philox seed and offset int64 scalars.
A row with no key to attend gives output 0 and log-sum-exp +inf, as flash attention's kernels write it.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["flash_forward", "flash_backward", "flash_forward_into", "efficient_forward", "efficient_backward",
           "sdpa_efficient", "sdpa_efficient_backward", "fused_rms_norm_backward"]


def _refuse_dropout(op: str, p: float) -> None:
    if p > 0:
        from ..errors import CapabilityError

        raise CapabilityError(f"aten::{op} with dropout_p={p} on the emulated cuda device: CUDA's kernel draws its "
                              "dropout mask from Philox inside the kernel and its backward redraws it from the "
                              "returned RNG state, which the device does not reproduce; pass dropout_p=0.0, or call "
                              "scaled_dot_product_attention with dropout_p (its math path draws from the device's "
                              "generator)")


def _segments(cu: Any, total: int) -> tuple[Any, Any, Any]:
    """Per token of a packed batch: its sequence, its position in it, and its sequence's length."""
    import torch

    cu = cu.long()
    idx = torch.arange(total, device=cu.device)
    seg = torch.searchsorted(cu[1:], idx, right=True)
    start = cu.index_select(0, seg)
    length = cu.index_select(0, seg + 1) - start
    return seg, idx - start, length


def _mask(lq: Any, lk: Any, pos_q: Any, pos_k: Any, causal: str | None, left: int, right: int) -> Any:
    """Which keys each query may attend: pos_q (…, Lq, 1) and pos_k (…, 1, Lk) positions in their sequences,
    lq / lk their lengths broadcast alike. causal: None, "top_left" or "bottom_right"; left / right: the
    window (negative: unbounded), aligned as flash attention aligns it (bottom right)."""
    keep = None
    shift = lk - lq
    if causal == "top_left":
        keep = pos_k <= pos_q
    elif causal == "bottom_right":
        right = 0
    if right >= 0:
        k = pos_k <= pos_q + shift + right
        keep = k if keep is None else keep & k
    if left >= 0:
        k = pos_k >= pos_q + shift - left
        keep = k if keep is None else keep & k
    return keep


def _scores_mask(q: Any, k: Any, cu_q: Any, cu_k: Any, causal: str | None, left: int, right: int) -> Any:
    """The mask of the (N, 1, Lq, Lk) score matrix (None: every key), N = B dense, 1 variable-length."""
    import torch

    if cu_q is not None:
        tq, tk = q.shape[0], k.shape[0]
        sq, pq, lq = _segments(cu_q, tq)
        sk, pk, lk = _segments(cu_k, tk)
        same = sq[:, None] == sk[None, :]
        ck = cu_k.long()
        lk_of_q = ck.index_select(0, sq + 1) - ck.index_select(0, sq)  # the key length of each query's sequence
        keep = _mask(lq[:, None], lk_of_q[:, None], pq[:, None], pk[None, :], causal, left, right)
        keep = same if keep is None else same & keep
        return keep[None, None]
    lq, lk = q.shape[1], k.shape[1]
    if causal is None and left < 0 and right < 0:
        return None
    dev = q.device
    keep = _mask(lq, lk, torch.arange(lq, device=dev)[:, None], torch.arange(lk, device=dev)[None, :],
                 causal, left, right)
    return None if keep is None else keep[None, None]


def _heads_first(t: Any, varlen: bool) -> Any:
    """(B, L, H, D) -> (B, H, L, D); (T, H, D) -> (1, H, T, D)."""
    return t.transpose(0, 1).unsqueeze(0) if varlen else t.transpose(1, 2)


def _expand_heads(k: Any, heads: int) -> Any:
    hk = k.shape[1]
    return k if hk == heads else k.repeat_interleave(heads // hk, dim=1)


def _attention(q: Any, k: Any, v: Any, keep: Any, scale: float, bias: Any = None) -> tuple[Any, Any, Any]:
    """Float32 attention of (N, H, Lq, D) over (N, H, Lk, D): output, log-sum-exp (N, H, Lq), probabilities."""
    import torch

    qf, kf, vf = q.float(), _expand_heads(k, q.shape[1]).float(), _expand_heads(v, q.shape[1]).float()
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias.float()
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    empty = torch.isneginf(lse)
    p = torch.exp(s - lse.masked_fill(empty, 0.0).unsqueeze(-1))
    if keep is not None:
        p = p.masked_fill(~keep, 0.0)
    out = torch.matmul(p, vf)
    return out, lse.masked_fill(empty, float("inf")), p


def _attention_backward(q: Any, k: Any, v: Any, out: Any, grad: Any, keep: Any, scale: float,
                        lse: Any, bias: Any = None) -> tuple[Any, Any, Any, Any]:
    """Gradients of q, k, v (and of the scores, for a bias) from the forward's log-sum-exp, all (N, H, L, D)."""
    import torch

    heads, hk = q.shape[1], k.shape[1]
    qf, kf, vf = q.float(), _expand_heads(k, heads).float(), _expand_heads(v, heads).float()
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias.float()
    finite = torch.isfinite(lse)
    p = torch.exp(s - lse.float().masked_fill(~finite, 0.0).unsqueeze(-1))
    p = p.masked_fill(~finite.unsqueeze(-1), 0.0)
    if keep is not None:
        p = p.masked_fill(~keep, 0.0)
    g = grad.float()
    dv = torch.matmul(p.transpose(-1, -2), g)
    dp = torch.matmul(g, vf.transpose(-1, -2))
    delta = (g * out.float()).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-1, -2), qf) * scale
    if hk != heads:  # grouped heads: each key head's gradient sums over the query heads that read it
        n, _, lk, d = dk.shape
        dk = dk.view(n, hk, heads // hk, lk, d).sum(2)
        dv = dv.view(n, hk, heads // hk, lk, dv.shape[-1]).sum(2)
    return dq, dk, dv, ds


def _back(t: Any, like: Any, varlen: bool) -> Any:
    """(N, H, L, D) float32 to the layout and dtype of `like` ((B, L, H, D) or (T, H, D)), as empty_like(like)."""
    import torch

    t = t.squeeze(0).transpose(0, 1) if varlen else t.transpose(1, 2)
    out = torch.empty_like(like)
    out.copy_(t)
    return out


def _window(left: Any, right: Any, causal: bool) -> tuple[int, int]:
    lw = -1 if left is None else int(left)
    rw = -1 if right is None else int(right)
    return lw, (0 if causal else rw)


def flash_forward(query: Any, key: Any, value: Any, cum_seq_q: Any, cum_seq_k: Any, max_q: int, max_k: int,
                  dropout_p: float, is_causal: bool, return_debug_mask: bool, *, scale: float | None = None,
                  window_size_left: int | None = None, window_size_right: int | None = None,
                  seqused_k: Any = None, alibi_slopes: Any = None, block_table: Any = None,
                  num_splits: int | None = None) -> tuple[Any, ...]:
    import torch

    _refuse_dropout("_flash_attention_forward", dropout_p)
    _unsupported("_flash_attention_forward", seqused_k=seqused_k, alibi_slopes=alibi_slopes,
                 block_table=block_table, return_debug_mask=return_debug_mask or None)
    varlen = cum_seq_q is not None
    sc = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    left, right = _window(window_size_left, window_size_right, is_causal)
    keep = _scores_mask(query, key, cum_seq_q, cum_seq_k, None, left, right)
    out, lse, _ = _attention(_heads_first(query, varlen), _heads_first(key, varlen), _heads_first(value, varlen),
                             keep, sc)
    lse = lse.squeeze(0).contiguous() if varlen else lse.contiguous()
    dev = query.device
    rng_state = torch.zeros(2, dtype=torch.uint64, device=dev)
    unused = torch.zeros((), dtype=torch.uint64, device=dev)
    debug = torch.empty(0, dtype=query.dtype, device=dev)
    return _back(out, query, varlen), lse, rng_state, unused, debug


def flash_forward_into(out: Any, query: Any, key: Any, value: Any, cum_seq_q: Any, cum_seq_k: Any, max_q: int,
                       max_k: int, dropout_p: float, is_causal: bool, return_debug_mask: bool, **kw: Any) -> Any:
    o, lse, *_ = flash_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                               return_debug_mask, **kw)
    out.copy_(o)
    return lse


def flash_backward(grad_out: Any, query: Any, key: Any, value: Any, out: Any, logsumexp: Any, cum_seq_q: Any,
                   cum_seq_k: Any, max_q: int, max_k: int, dropout_p: float, is_causal: bool, rng_state: Any,
                   unused: Any, *, scale: float | None = None, window_size_left: int | None = None,
                   window_size_right: int | None = None) -> tuple[Any, Any, Any]:
    _refuse_dropout("_flash_attention_backward", dropout_p)
    varlen = cum_seq_q is not None and cum_seq_q.numel() > 0
    sc = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    left, right = _window(window_size_left, window_size_right, is_causal)
    keep = _scores_mask(query, key, cum_seq_q if varlen else None, cum_seq_k if varlen else None, None, left, right)
    lse = logsumexp.unsqueeze(0) if varlen else logsumexp
    dq, dk, dv, _ = _attention_backward(_heads_first(query, varlen), _heads_first(key, varlen),
                                        _heads_first(value, varlen), _heads_first(out, varlen),
                                        _heads_first(grad_out, varlen), keep, sc, lse)
    return _back(dq, query, varlen), _back(dk, key, varlen), _back(dv, value, varlen)


_MASKS = {0: None, 1: "top_left", 2: "bottom_right"}


def _efficient_mask(query: Any, key: Any, cu_q: Any, cu_k: Any, custom_mask_type: int, window_size: Any) -> Any:
    if custom_mask_type not in _MASKS:
        raise RuntimeError(f"custom_mask_type not supported: {custom_mask_type}")
    _unsupported("_efficient_attention_forward", window_size=window_size or None)
    if cu_q is not None:
        keep = _scores_mask(query[0], key[0], cu_q, cu_k, _MASKS[custom_mask_type], -1, -1)
    else:
        keep = _scores_mask(query, key, None, None, _MASKS[custom_mask_type], -1, -1)
    return keep


def efficient_forward(query: Any, key: Any, value: Any, bias: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                      max_seqlen_q: Any, max_seqlen_k: Any, dropout_p: float, custom_mask_type: int,
                      compute_log_sumexp: bool = False, *, scale: float | None = None, seqlen_k: Any = None,
                      window_size: int | None = None) -> tuple[Any, ...]:
    import torch

    _refuse_dropout("_efficient_attention_forward", dropout_p)
    _unsupported("_efficient_attention_forward", seqlen_k=seqlen_k)
    sc = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    keep = _efficient_mask(query, key, cu_seqlens_q, cu_seqlens_k, custom_mask_type, window_size)
    out, lse, _ = _attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), keep, sc, bias)
    m = query.shape[1]
    dev = query.device
    max_q = int(max_seqlen_q) if cu_seqlens_q is not None and max_seqlen_q is not None else m
    max_k = int(max_seqlen_k) if max_seqlen_k is not None else key.shape[1]
    res = torch.empty(query.shape[0], m, query.shape[2], value.shape[-1], dtype=query.dtype, device=dev)
    res.copy_(out.transpose(1, 2))
    if cu_seqlens_q is not None:
        lse = _per_sequence(lse[0], cu_seqlens_q, max_q)  # (sequences, H, max_q)
    width = math.ceil(max_q / 32) * 32 if compute_log_sumexp else 0
    padded = torch.full((lse.shape[0], lse.shape[1], width), float("inf"), dtype=torch.float32, device=dev)
    if width:
        padded[:, :, : lse.shape[-1]] = lse
    seed = torch.zeros((), dtype=torch.long, device=dev)
    offset = torch.zeros((), dtype=torch.long, device=dev)
    return res, padded, seed, offset, max_q, max_k


def _per_sequence(lse: Any, cu: Any, max_q: int) -> Any:
    """(H, total) to (sequences, H, max_q), each sequence's rows from its start (+inf past its end)."""
    import torch

    heads, total = lse.shape
    n = cu.numel() - 1
    starts = cu[:-1].long()
    idx = starts[:, None] + torch.arange(max_q, device=lse.device)[None, :]
    valid = idx < cu[1:].long()[:, None]
    gathered = lse[:, idx.clamp(max=max(total - 1, 0)).reshape(-1)].view(heads, n, max_q).transpose(0, 1)
    return gathered.masked_fill(~valid[:, None, :], float("inf"))


def _flat_lse(lse: Any, cu: Any, total: int) -> Any:
    """(sequences, H, ≥max_q) back to (1, H, total)."""
    seg, pos, _ = _segments(cu, total)
    return lse[seg, :, pos].transpose(0, 1).unsqueeze(0)


def efficient_backward(grad_out: Any, query: Any, key: Any, value: Any, bias: Any, out: Any, cu_seqlens_q: Any,
                       cu_seqlens_k: Any, max_seqlen_q: Any, max_seqlen_k: Any, logsumexp: Any, dropout_p: float,
                       philox_seed: Any, philox_offset: Any, custom_mask_type: int, bias_requires_grad: bool, *,
                       scale: float | None = None, num_splits_key: int | None = None, window_size: int | None = None,
                       shared_storage_dqdkdv: bool = False) -> tuple[Any, Any, Any, Any]:
    import torch

    _refuse_dropout("_efficient_attention_backward", dropout_p)
    sc = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    keep = _efficient_mask(query, key, cu_seqlens_q, cu_seqlens_k, custom_mask_type, window_size)
    m = query.shape[1]
    if cu_seqlens_q is not None:
        lse = _flat_lse(logsumexp, cu_seqlens_q, m)
    else:
        lse = logsumexp[:, :, :m]
    dq, dk, dv, ds = _attention_backward(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                         out.transpose(1, 2), grad_out.transpose(1, 2), keep, sc, lse, bias)
    gq, gk, gv = (torch.empty_like(t) for t in (query, key, value))
    gq.copy_(dq.transpose(1, 2))
    gk.copy_(dk.transpose(1, 2))
    gv.copy_(dv.transpose(1, 2))
    if bias is not None and bias_requires_grad:
        g = ds
        while g.dim() > bias.dim():
            g = g.sum(0)
        for d in range(bias.dim()):
            if bias.shape[d] == 1 and g.shape[d] != 1:
                g = g.sum(d, keepdim=True)
        gb = torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)
        gb.copy_(g)
    elif bias is not None:
        gb = torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)
    else:
        gb = torch.empty((), device=query.device)
    return gq, gk, gv, gb


def sdpa_efficient(query: Any, key: Any, value: Any, attn_bias: Any, compute_log_sumexp: bool,
                   dropout_p: float = 0.0, is_causal: bool = False, *, scale: float | None = None) -> tuple[Any, ...]:
    """(B, H, L, D) as SDPA passes them, over _efficient_attention_forward's (B, L, H, D)."""
    out, lse, seed, offset, _, _ = efficient_forward(query.transpose(1, 2), key.transpose(1, 2),
                                                     value.transpose(1, 2), attn_bias, None, None, None, None,
                                                     dropout_p, 1 if is_causal else 0, compute_log_sumexp, scale=scale)
    return out.transpose(1, 2), lse, seed, offset


def sdpa_efficient_backward(grad_out_: Any, query: Any, key: Any, value: Any, attn_bias: Any, out: Any,
                            logsumexp: Any, philox_seed: Any, philox_offset: Any, dropout_p: float,
                            grad_input_mask: Any, is_causal: bool = False, *,
                            scale: float | None = None) -> tuple[Any, Any, Any, Any]:
    t = (lambda x: x.transpose(1, 2))
    bias_grad = attn_bias is not None and bool(grad_input_mask[3])
    dq, dk, dv, db = efficient_backward(t(grad_out_), t(query), t(key), t(value), attn_bias, t(out), None, None,
                                        query.shape[2], key.shape[2], logsumexp, dropout_p, philox_seed,
                                        philox_offset, 1 if is_causal else 0, bias_grad, scale=scale)
    return t(dq), t(dk), t(dv), db if bias_grad else None


def fused_rms_norm_backward(grad_out: Any, input: Any, normalized_shape: Any, rstd: Any, weight: Any,
                            output_mask: Any) -> tuple[Any, Any]:
    """CUDA's fused RMSNorm backward, which F.rms_norm's autograd reaches wherever torch sends a cuda
    tensor through aten::_fused_rms_norm: torch's own decomposition of it (the formula Inductor compiles
    for CUDA, in float32 for half inputs as CUDA's kernel accumulates). An output the mask leaves out is
    None, as CUDA's kernel leaves it undefined."""
    from torch._decomp.decompositions import _fused_rms_norm_backward

    return _fused_rms_norm_backward(grad_out, input, list(normalized_shape), rstd, weight, list(output_mask))


def _unsupported(op: str, **given: Any) -> None:
    named = [k for k, v in given.items() if v is not None]
    if named:
        from ..errors import CapabilityError

        raise CapabilityError(f"aten::{op} with {', '.join(named)} on the emulated cuda device: the device's "
                              f"kernel of this CUDA-only operator does not take {', '.join(named)}; call it without, "
                              "or use scaled_dot_product_attention")
