"""torch_npu.npu_fusion_attention on the CPU, from its documented semantics ([FA], see `_attn_rules`).

Implemented: layouts BSH, SBH, BSND, BNSD, TND (varlen); sparse_mode 0-4; scale; keep_prob; GQA
(Nq % Nkv == 0); the 7 outputs. Refused with a clear error: pse, padding_mask, prefix, sink and
sparse_mode 5-8 (prefix and split-sequence modes are not simulated), and everything [FA] forbids.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...errors import CapabilityError
from ._attn_rules import INT_MAX, NpuOperatorError, attend_one, band, check_compressed_mask, host, int_list

__all__ = ["npu_fusion_attention"]

_OP = "torch_npu.npu_fusion_attention"
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # [FA] query/key/value: float16、bfloat16、float32
_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")          # [FA] input_layout


def _to_bsnd(t: torch.Tensor, layout: str, heads: Optional[int], d: Optional[int]) -> torch.Tensor:
    """q/k/v in `layout` -> (B, S, N, D). BSH/SBH need the head count (q) or the head dim (k, v)."""
    if t.dim() != (3 if layout in ("BSH", "SBH") else 4):
        raise NpuOperatorError(f"{_OP}: input_layout={layout!r} needs {3 if layout in ('BSH', 'SBH') else 4}-D "
                               f"query/key/value, got shape {tuple(t.shape)}")
    if layout == "BSND":
        return t
    if layout == "BNSD":
        return t.transpose(1, 2)
    if layout == "SBH":
        t = t.transpose(0, 1)
    h = t.shape[-1]
    if heads is None:
        assert d is not None
        if d == 0 or h % d:
            raise NpuOperatorError(f"{_OP}: key/value hidden size {h} is not a multiple of the head dim {d}")
        heads = h // d
    if h % heads:
        raise NpuOperatorError(f"{_OP}: query hidden size {h} is not a multiple of head_num={heads}")
    return t.reshape(t.shape[0], t.shape[1], heads, h // heads)


def _from_bsnd(out: torch.Tensor, layout: str) -> torch.Tensor:
    """(B, S, N, Dv) -> the query's layout ([META]: BSH/SBH give H = N * Dv, BNSD/BSND keep N, Dv)."""
    if layout == "BSND":
        return out
    if layout == "BNSD":
        return out.transpose(1, 2).contiguous()
    flat = out.reshape(out.shape[0], out.shape[1], -1)
    return flat.transpose(0, 1).contiguous() if layout == "SBH" else flat


def _segments(name: str, ends: Optional[list[int]], total: int) -> list[Optional[tuple[int, int]]]:
    """[FA] actual_seq_qlen/kvlen are cumulative ends ("2 2 2 2 2 -> 2 4 6 8 10"); a length may be 0
    ("[2, 2, 0, 2, 2] -> [2, 4, 4, 6, 8]"); trailing batches may be left out with zeros ("[2, 5, 9, 0, 0]").
    Returns (start, end) per batch, None for a left-out one."""
    if ends is None:
        raise NpuOperatorError(f"{_OP}: input_layout='TND' needs {name} (cumulative ends per sequence, "
                               "e.g. lengths [2, 3] -> [2, 5])")
    segs: list[Optional[tuple[int, int]]] = []
    last, tail = 0, False
    for e in ends:
        if tail or (e == 0 and last > 0):
            tail = True
            if e != 0:
                raise NpuOperatorError(f"{_OP}: {name}={ends}: after a trailing 0 (batches left out) every "
                                       "entry must be 0")
            segs.append(None)
            continue
        if e < last:
            raise NpuOperatorError(f"{_OP}: {name}={ends} must be cumulative (non-decreasing) ends, not "
                                   "per-sequence lengths")
        segs.append((last, e))
        last = e
    if last > total:
        raise NpuOperatorError(f"{_OP}: {name} ends at {last} but the tensor holds {total} tokens")
    return segs


def _allowed(mask: Optional[torch.Tensor], mode: int, sq: int, skv: int, pre: int, nxt: int) -> torch.Tensor:
    """(N|1, Sq, Skv) bool for one sequence; `mask` is that sequence's slice for modes 0/1."""
    if mask is None:
        # [FA] "当atten_mask输入为None时, sparse_mode, pre_tockens, next_tockens参数不生效, 固定为全计算"
        return torch.ones(1, sq, skv, dtype=torch.bool)
    if mode == 0:  # [FA] defaultMask: the full mask, consistent with pre/next (top-left origin, see band())
        return (mask == 0) & band(sq, skv, pre, nxt, bottom_right=False)
    if mode == 1:  # [FA] allMask: the full mask, pre/next ignored
        return mask == 0
    if mode == 2:  # [FA] leftUpCausal, pre/next ignored
        return band(sq, skv, INT_MAX, 0, bottom_right=False).unsqueeze(0)
    if mode == 3:  # [FA] rightDownCausal, pre/next ignored
        return band(sq, skv, INT_MAX, 0, bottom_right=True).unsqueeze(0)
    return band(sq, skv, pre, nxt, bottom_right=True).unsqueeze(0)  # 4: band from the bottom-right


def _full_mask(mask: torch.Tensor, batch: int, heads: int, sq: int, skv: int, varlen: bool) -> torch.Tensor:
    """sparse_mode 0/1: [FA] shapes BNSS, B1SS, 11SS, SS; "varlen场景只支持SS格式, SS分别是maxSq和maxSkv"."""
    ok = ((sq, skv),) if varlen else ((sq, skv), (1, 1, sq, skv), (batch, 1, sq, skv), (batch, heads, sq, skv))
    if tuple(mask.shape) not in ok:
        raise NpuOperatorError(f"{_OP}: atten_mask of shape {tuple(mask.shape)} does not fit; for "
                               f"sparse_mode 0/1 it must be one of {list(ok)}")
    return mask.reshape((1, 1) + tuple(mask.shape[-2:])) if mask.dim() == 2 else mask


def _check(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, sparse_mode: int, keep_prob: float,
           extras: dict) -> None:
    for name, val in extras.items():
        if val is not None:
            raise CapabilityError(f"{_OP}: argument {name} is not simulated (CPU implementation of the documented "
                                  f"operator); pass {name}=None")
    if sparse_mode not in (0, 1, 2, 3, 4):
        raise CapabilityError(f"{_OP}: sparse_mode={sparse_mode} is not simulated (prefix/split-sequence modes "
                              "5-8); use 0-4")
    if not (query.dtype == key.dtype == value.dtype) or query.dtype not in _DTYPES:
        raise NpuOperatorError(f"{_OP}: query/key/value must share one dtype of float16/bfloat16/float32, got "
                               f"{query.dtype}/{key.dtype}/{value.dtype}")
    if key.shape != value.shape[:-1] + key.shape[-1:]:
        raise NpuOperatorError(f"{_OP}: key {tuple(key.shape)} and value {tuple(value.shape)} must agree but "
                               "for the head dim")
    if not 0.0 < keep_prob <= 1.0:
        raise NpuOperatorError(f"{_OP}: keep_prob={keep_prob} must be in (0, 1]")


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=INT_MAX, next_tockens=INT_MAX, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None):
    """[FA]: (attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels).

    attention_out has the query's layout with value's head dim; softmax_max/sum are float32
    (B, N, Sq, 8), for TND (T, N, 8) — the shapes of [META]; [FA] says TND's default softmax layout is
    "NTD" but the wheel's shape function gives (T, N, 8), which we follow. The 8 copies per row hold the
    same value. softmax_out is empty (a reserved output, [FA] "预留参数"); seed/offset/numels are 0
    (no Philox state here).
    """
    _check(query, key, value, int(sparse_mode), float(keep_prob),
           {"pse": pse, "padding_mask": padding_mask, "prefix": prefix, "sink": sink})
    if input_layout not in _LAYOUTS:
        raise NpuOperatorError(f"{_OP}: input_layout={input_layout!r} is not one of {_LAYOUTS}")
    mode, pre, nxt = int(sparse_mode), int(pre_tockens), int(next_tockens)
    dev, dtype = query.device, query.dtype
    q, k, v, mask = host(query), host(key), host(value), host(atten_mask)
    if mode in (2, 3, 4) and mask is not None:
        check_compressed_mask(mask, _OP, mode)
    varlen = input_layout == "TND"
    if varlen:
        if q.dim() != 3 or q.shape[1] != head_num:
            raise NpuOperatorError(f"{_OP}: TND query must be (T, head_num={head_num}, D), got {tuple(q.shape)}")
        qs = _segments("actual_seq_qlen", int_list(_OP, "actual_seq_qlen", actual_seq_qlen), q.shape[0])
        ks = _segments("actual_seq_kvlen", int_list(_OP, "actual_seq_kvlen", actual_seq_kvlen), k.shape[0])
        if len(qs) != len(ks):
            raise NpuOperatorError(f"{_OP}: actual_seq_qlen and actual_seq_kvlen must have one entry per batch, "
                                   f"got {len(qs)} and {len(ks)}")
        pairs = [(i, a, b) for i, (a, b) in enumerate(zip(qs, ks)) if a is not None and b is not None]
        seqs = [(q[a[0]:a[1]], k[b[0]:b[1]], v[b[0]:b[1]]) for _, a, b in pairs]
    else:
        if actual_seq_qlen is not None or actual_seq_kvlen is not None:
            raise NpuOperatorError(f"{_OP}: actual_seq_qlen/actual_seq_kvlen are for input_layout='TND' only")
        q4 = _to_bsnd(q, input_layout, int(head_num), None)
        k4 = _to_bsnd(k, input_layout, None, q4.shape[-1])
        v4 = _to_bsnd(v, input_layout, k4.shape[2], None)
        seqs = [(q4[b], k4[b], v4[b]) for b in range(q4.shape[0])]
    n, d = seqs[0][0].shape[1:] if seqs else (int(head_num), q.shape[-1])
    nkv, dk, dv = (seqs[0][1].shape[1], seqs[0][1].shape[2], seqs[0][2].shape[2]) if seqs else (n, d, d)
    if n != head_num or nkv == 0 or n % nkv or n > 256:
        raise NpuOperatorError(f"{_OP}: head_num={head_num} must be the query's head count, at most 256 and a "
                               f"multiple of the key/value head count {nkv} (GQA)")
    if d != dk or dk < dv or not 1 <= d <= 768:  # [FA] "Dq=Dk和Dk≥Dv，取值范围1~768"
        raise NpuOperatorError(f"{_OP}: head dims must satisfy Dq == Dk >= Dv, 1..768; got {d}, {dk}, {dv}")
    if mode in (0, 1) and mask is not None:
        mq = max((s[0].shape[0] for s in seqs), default=0) if varlen else seqs[0][0].shape[0]
        mk = max((s[1].shape[0] for s in seqs), default=0) if varlen else seqs[0][1].shape[0]
        mask = _full_mask(mask, len(seqs), n, mq, mk, varlen)
    elif mode == 1:
        mask = None  # allMask without a mask: [FA] full computation (handled by _allowed)
    results = []
    for idx, (qb, kb, vb) in enumerate(seqs):
        sq, skv = qb.shape[0], kb.shape[0]
        mb = None
        if mask is not None:
            mb = mask if mode in (2, 3, 4) else mask[min(idx, mask.shape[0] - 1), :, :sq, :skv]
        results.append(attend_one(qb, kb, vb, float(scale), _allowed(mb, mode, sq, skv, pre, nxt), float(keep_prob)))
    if varlen:
        out = torch.zeros(q.shape[0], n, dv, dtype=torch.float32)  # rows of left-out batches: 0 (docs silent)
        smax = torch.zeros(q.shape[0], n, dtype=torch.float32)
        ssum = torch.zeros_like(smax)
        for (_, a, _b), (o, m, s_, _l) in zip(pairs, results):
            out[a[0]:a[1]] = o
            smax[a[0]:a[1]] = m.transpose(0, 1)
            ssum[a[0]:a[1]] = s_.transpose(0, 1)
        result = out
    else:
        result = _from_bsnd(torch.stack([r[0] for r in results]), input_layout)
        smax = torch.stack([r[1] for r in results])
        ssum = torch.stack([r[2] for r in results])
    eight = (*smax.shape, 8)
    return (result.to(dtype).to(dev), smax.unsqueeze(-1).expand(eight).contiguous().to(dev),
            ssum.unsqueeze(-1).expand(eight).contiguous().to(dev), torch.empty(0, dtype=dtype, device=dev), 0, 0, 0)
