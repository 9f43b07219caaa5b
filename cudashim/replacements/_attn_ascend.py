"""Ascend attention through torch_npu's fused operators.

VERIFICATION LEVEL: L0 — written against the operator docs shipped in the torch-npu 2.13.0 wheel
(`torch_npu/_op_plugin_docs.py`: npu_fusion_attention, npu_fused_infer_attention_score). In CI the argument
plumbing is checked against a recording stand-in of `torch_npu` (tests/replacements/test_ascend_plumbing.py),
and the mapping numerically against the float64 flash-attn oracle with CPU implementations of the
documented operators standing in (cudashim.emulated.npu.ops; tests/replacements/test_ascend_numerics.py).
Nothing here has run on an NPU or on the real operators.

Routing (what the docs allow):
- varlen prefill (packed TND)          -> npu_fusion_attention(q, k, v, heads, "TND", actual_seq_qlen=…)
  paged prefill: the docs exclude page attention with TND, so the pages in use are gathered first
- flash_attn_func (dense BSND)         -> npu_fusion_attention(q, k, v, heads, "BSND")
- KV-cache decode / chunked decode     -> npu_fused_infer_attention_score(..., input_layout="BSND",
  block_table=…, block_size=…, actual_seq_lengths_kv=…) with the cache as (blocks, block_size, Hk*D)
  (the only paged layout BSND accepts) when the docs allow the page size (Q_S > 1: a multiple of
  128 up to 512; Q_S == 1: 16-aligned up to 512), else the pages in use are gathered.
Masks: causal is bottom-right (sparse_mode=3, rightDownCausal) with the 2048x2048 compressed
lower-triangular mask the docs require; sliding windows are band mode (sparse_mode=4,
pre/next tokens counted from the bottom-right corner). A single decode query (Q_S == 1) takes no
sparse_mode or pre_tokens, so its window's left edge travels as a (B, 1, 1, KV_S) sparse_mode-0 mask.
flash-attn 4's seqused_k over packed keys packs the used keys first (TND lengths are contiguous). The operators take host int lists for the
sequence lengths, so those are read back (one sync per call), as the docs' examples do.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ._attn import Attn, unsupported
from ._varlen import blocks_needed, gather_packed_prefixes, gather_paged_packed, gather_paged_padded

__all__ = ["attend", "fusion_attention_tnd"]

_INT_MAX = 2147483647
_PATH = "ascend"


def _npu() -> Any:
    import torch_npu  # the real one on Ascend; tests put a recording stand-in in sys.modules

    return torch_npu


def _compressed_causal_mask(device: torch.device) -> torch.Tensor:
    # The docs: sparse_mode 2/3/4 take an optimised 2048x2048 mask, True (=masked) strictly above the diagonal.
    return torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=device), diagonal=1)


def _mask_args(a: Attn, pre: str, nxt: str) -> dict:
    """sparse_mode / atten_mask / pre+next tokens for flash-attn's bottom-right window semantics."""
    left, right = a.window
    if left < 0 and right < 0:
        return {"sparse_mode": 0}
    mask = _compressed_causal_mask(a.q.device)
    if left < 0 and right == 0:
        return {"atten_mask": mask, "sparse_mode": 3}
    return {
        "atten_mask": mask,
        "sparse_mode": 4,
        pre: left if left >= 0 else _INT_MAX,
        nxt: right if right >= 0 else _INT_MAX,
    }


def _reject(a: Attn, *, lse_ok: bool) -> None:
    if a.softcap > 0:
        raise unsupported(a.api, "softcap", _PATH, "pass softcap=0.0 (the fused NPU operators have no logit soft-capping)")
    if a.alibi_slopes is not None:
        raise unsupported(a.api, "alibi_slopes", _PATH, "use rotary positions or pass alibi_slopes=None")
    if a.want_probs or (a.want_lse and not lse_ok):
        raise unsupported(a.api, "return_attn_probs", _PATH, "call with return_attn_probs=False")


def _host_cumulative(cu: torch.Tensor) -> list[int]:
    """flash-attn's (B+1,) offsets -> the docs' cumulative ends without the leading 0."""
    return [int(x) for x in cu.tolist()][1:]


def fusion_attention_tnd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_qlen: list[int], seq_kvlen: list[int],
    scale: float, extra: Optional[dict] = None,
) -> torch.Tensor:
    """npu_fusion_attention on packed TND input; returns attention_out (first of its 7 outputs)."""
    kwargs = {"scale": scale, "actual_seq_qlen": seq_qlen, "actual_seq_kvlen": seq_kvlen}
    kwargs.update(extra or {"sparse_mode": 0})
    return _npu().npu_fusion_attention(q, k, v, q.shape[-2], "TND", **kwargs)[0]


def _varlen(a: Attn) -> torch.Tensor:
    _reject(a, lse_ok=False)
    k, v = a.k, a.v
    if a.paged:
        lens = [int(x) for x in a.key_lengths().tolist()]
        k = gather_paged_packed(a.k, a.block_table, lens)
        v = gather_paged_packed(a.v, a.block_table, lens)
        kv_ends = [sum(lens[: i + 1]) for i in range(len(lens))]
    else:
        assert a.cu_k is not None
        kv_ends = _host_cumulative(a.cu_k)
        if a.seqused_k is not None:
            # flash-attn 4's seqused_k: only the first seqused_k[b] keys from cu_k[b] on are used. The
            # docs' actual_seq_kvlen are cumulative ends of contiguous segments and cannot skip the unused
            # tails, so the used keys are packed first (found by the numeric check against the simulator).
            lens = [int(x) for x in a.seqused_k.tolist()]
            if lens != [e - s for s, e in zip([0] + kv_ends, kv_ends)]:
                k = gather_packed_prefixes(a.k, a.cu_k, lens)
                v = gather_packed_prefixes(a.v, a.cu_k, lens)
                kv_ends = [sum(lens[: i + 1]) for i in range(len(lens))]
    extra = _mask_args(a, "pre_tockens", "next_tockens")
    if a.dropout_p > 0:
        extra["keep_prob"] = 1.0 - a.dropout_p
    return fusion_attention_tnd(a.q, k, v, _host_cumulative(a.cu_q), kv_ends, a.scale, extra)


def _dense(a: Attn) -> torch.Tensor:
    _reject(a, lse_ok=False)
    b, sq = a.batch, a.q_len
    sk = a.k.shape[0] // b
    q = a.q.view(b, sq, *a.q.shape[1:])
    k = a.k.view(b, sk, *a.k.shape[1:])
    v = a.v.view(b, sk, *a.v.shape[1:])
    extra = _mask_args(a, "pre_tockens", "next_tockens")
    if a.dropout_p > 0:
        extra["keep_prob"] = 1.0 - a.dropout_p
    out = _npu().npu_fusion_attention(q, k, v, q.shape[2], "BSND", scale=a.scale, **extra)[0]
    return out.reshape(b * sq, *out.shape[2:])


def _pages_fit(q_len: int, block_size: int) -> bool:
    """Page sizes the docs let npu_fused_infer_attention_score read in place: with Q_S > 1 "block_size最小为128,
    最大为512, 且要求是128的倍数"; with Q_S == 1 non-zero, at most 512 and 16-aligned (float16/bfloat16)."""
    if q_len > 1:
        return 128 <= block_size <= 512 and block_size % 128 == 0
    return 0 < block_size <= 512 and block_size % 16 == 0


def _decode_window_mask(lens: list[int], kv_s: int, left: int, device: torch.device) -> torch.Tensor:
    """(B, 1, 1, KV_S) bool, True = masked: the one query of sequence b sits at lens[b] - 1 (bottom-right)
    and sees keys lens[b] - 1 - left .. lens[b] - 1; a right window reaches no key past the last one.
    KV_S is the cache's width (block_table columns * block_size when paged), which the docs require of
    masks under page attention ("KV_S>=maxBlockNumPerSeq*blockSize")."""
    first = torch.tensor([n - 1 - left for n in lens], device=device).view(-1, 1, 1, 1)
    return torch.arange(kv_s, device=device).view(1, 1, 1, -1) < first


def _capturing() -> bool:
    """Whether an NPU graph capture is recording the current stream (torch.npu.is_current_stream_capturing)."""
    f = getattr(getattr(_npu(), "npu", None), "is_current_stream_capturing", None)
    return bool(f()) if f is not None else False


def _captured_decode(a: Attn, kwargs: dict) -> bool:
    """A paged decode inside an NPU graph capture, without reading the key lengths on the host.

    actual_seq_lengths_kv is a host int list, fixed when the capture records the operator (torch_npu
    changes it only through NPUGraph.update), and reading cache_seqlens into it is a synchronising copy
    that the capture refuses. So every sequence gets the block table's whole width, and a (B, 1, 1, KV_S)
    mask computed on the device from the lengths hides the keys past each one (and left of a window):
    every replay reads the lengths the tensors hold then. Padded block-table entries (-1) are clamped
    to page 0; the mask hides what they read. The operator's docs then need as many cache blocks as the
    batch times the table's width ("blocknum不能小于...每个batch的block数量之和"): an engine's KV pool is
    that large; a smaller cache gets the operator's own error. Returns False where this does not apply."""
    if a.q_len != 1 or not a.paged or not _pages_fit(1, a.k.shape[1]) or not _capturing():
        return False
    bs = a.k.shape[1]
    kv_s = a.block_table.shape[1] * bs
    lens = a.key_lengths().to(torch.int64).view(-1, 1, 1, 1)
    pos = torch.arange(kv_s, device=a.q.device).view(1, 1, 1, -1)
    mask = pos >= lens
    if a.window[0] >= 0:
        mask = mask | (pos < lens - 1 - a.window[0])
    kwargs.update(actual_seq_lengths_kv=[kv_s] * a.batch, atten_mask=mask, sparse_mode=0,
                  block_table=a.block_table.clamp(min=0).to(torch.int32), block_size=bs)
    return True


def _kvcache(a: Attn) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    _reject(a, lse_ok=True)
    b, sq = a.batch, a.q_len
    hq, d = a.q.shape[1], a.q.shape[2]
    hk = a.k.shape[-2]
    q = a.q.view(b, sq, hq, d)
    captured: dict = {}
    if _captured_decode(a, captured):
        bs = a.k.shape[1]
        k = a.k.reshape(a.k.shape[0], bs, hk * d)
        v = a.v.reshape(a.v.shape[0], bs, hk * a.v.shape[-1])
        kwargs = {"num_heads": hq, "num_key_value_heads": hk, "scale": a.scale, "input_layout": "BSND", **captured}
        return _call_fia(a, q, k, v, kwargs)
    lens = [int(x) for x in a.key_lengths().tolist()]
    kwargs: dict = {
        "num_heads": hq,
        "num_key_value_heads": hk,
        "scale": a.scale,
        "input_layout": "BSND",
        "actual_seq_lengths_kv": lens,
    }
    if a.paged:
        bs = a.k.shape[1]
        if _pages_fit(sq, bs):
            # paged BSND takes the cache as (blocknum, blocksize, H) with H = Hk * D
            k = a.k.reshape(a.k.shape[0], bs, hk * d)
            v = a.v.reshape(a.v.shape[0], bs, hk * a.v.shape[-1])
            kwargs["block_table"] = a.block_table.to(torch.int32)
            kwargs["block_size"] = bs
            kv_s = a.block_table.shape[1] * bs
        else:
            nb = min(blocks_needed(max(lens, default=0), bs), a.block_table.shape[1])
            k = gather_paged_padded(a.k, a.block_table, max(nb, 1))
            v = gather_paged_padded(a.v, a.block_table, max(nb, 1))
            kv_s = k.shape[1]
    else:
        sc = a.k.shape[0] // b
        k = a.k.view(b, sc, *a.k.shape[1:])
        v = a.v.view(b, sc, *a.v.shape[1:])
        kv_s = sc
    if sq > 1:
        kwargs.update(_mask_args(a, "pre_tokens", "next_tokens"))
    elif a.window[0] >= 0:
        # With Q_S == 1 the docs make sparse_mode and pre_tokens ineffective, but a sparse_mode-0 mask of
        # shape (B, 1, Q_S, KV_S) still applies: the window's left edge becomes that mask.
        kwargs.update(atten_mask=_decode_window_mask(lens, kv_s, a.window[0], a.q.device), sparse_mode=0)
    return _call_fia(a, q, k, v, kwargs)


def _call_fia(a: Attn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              kwargs: dict) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    b, sq, hq = a.batch, a.q_len, a.q.shape[1]
    if a.want_lse:
        kwargs["softmax_lse_flag"] = True
    out, lse = _npu().npu_fused_infer_attention_score(q, k, v, **kwargs)
    out = out.reshape(b * sq, hq, -1)
    if not a.want_lse:
        return out, None
    # docs: softmax_lse is (B, N, S, 1) in BSND; flash-attn's varlen convention is (H, total_q)
    return out, lse.reshape(b, hq, sq).permute(1, 0, 2).reshape(hq, b * sq).float()


def attend(a: Attn) -> tuple[torch.Tensor, Optional[torch.Tensor], None]:
    if a.kind == "kvcache":
        out, lse = _kvcache(a)
        return out, lse, None
    if a.kind == "dense":
        return _dense(a), None, None
    return _varlen(a), None, None
