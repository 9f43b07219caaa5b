"""torch_npu.npu_fused_infer_attention_score on the CPU, from its documented semantics ([FIA], see `_attn_rules`).

Implemented: layouts BSH, BSND, BNSD, BNSD_BSND, TND; both branches (Q_S == 1 "IncreFlashAttention",
else "PromptFlashAttention"); sparse_mode 0-4; scale; GQA (num_key_value_heads); actual_seq_lengths /
actual_seq_lengths_kv; page attention (block_table + block_size, caches (blocknum, blocksize, H) and
(blocknum, KV_N, blocksize, D)); softmax_lse. Refused with a clear error: quantisation, pse_shift, rope
(MLA), shared prefix, left padding, sparse_mode 9, and what [FIA] forbids.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...errors import CapabilityError
from ._attn_rules import INT_MAX, NpuOperatorError, attend_one, band, check_compressed_mask, host, int_list

__all__ = ["npu_fused_infer_attention_score"]

_OP = "torch_npu.npu_fused_infer_attention_score"
_LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND", "TND")  # [FIA] input_layout (Atlas A2/A3)


def _err(msg: str) -> NpuOperatorError:
    return NpuOperatorError(f"{_OP}: {msg}")


def _q_bsnd(q: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    want = 3 if layout in ("BSH", "TND") else 4
    if q.dim() != want:
        raise _err(f"input_layout={layout!r} needs a {want}-D query, got {tuple(q.shape)}")
    if layout == "BSH":
        if q.shape[-1] % heads:
            raise _err(f"query hidden size {q.shape[-1]} is not a multiple of num_heads={heads}")
        return q.reshape(q.shape[0], q.shape[1], heads, -1)
    if layout in ("BNSD", "BNSD_BSND"):
        q = q.transpose(1, 2)
    if q.shape[2] != heads:  # [FIA] num_heads: "需要与shape中的query的N轴shape值相同"
        raise _err(f"num_heads={heads} differs from the query's head axis {q.shape[2]}")
    return q


def _kv_bsnd(t: torch.Tensor, layout: str, nkv: int, name: str) -> torch.Tensor:
    """Non-paged key/value -> (B, S, KV_N, D)."""
    if layout == "BSH":
        if t.dim() != 3 or t.shape[-1] % nkv:
            raise _err(f"BSH {name} must be (B, S, KV_N*D) with KV_N={nkv}, got {tuple(t.shape)}")
        return t.reshape(t.shape[0], t.shape[1], nkv, -1)
    if t.dim() != 4:
        raise _err(f"{layout} {name} must be 4-D, got {tuple(t.shape)}")
    t = t.transpose(1, 2) if layout.startswith("BNSD") else t
    if t.shape[2] != nkv:  # [FIA] num_key_value_heads "还需要与shape中的key/value的N轴shape值相同"
        raise _err(f"num_key_value_heads={nkv} differs from {name}'s head axis {t.shape[2]}")
    return t


def _per_batch(name: str, vals: Optional[list[int]], batch: int, default: int) -> list[int]:
    """[FIA] non-TND actual_seq_lengths(_kv): per-batch lengths; None = the tensor's S; "传入长度为1时, 每个
    Batch使用相同seqlen; 传入长度大于等于Batch时取seqlen的前Batch个数. 其他长度不支持"."""
    if vals is None:
        return [default] * batch
    if len(vals) == 1:
        vals = vals * batch
    if len(vals) < batch:
        raise _err(f"{name} has {len(vals)} entries for batch {batch}; pass 1 or at least {batch}")
    vals = vals[:batch]
    if any(x < 0 or x > default for x in vals):
        raise _err(f"{name}={vals}: each length must be in 0..{default} (the tensor's S)")
    return vals


def _pages(key: torch.Tensor, value: torch.Tensor, layout: str, table: torch.Tensor, bs: int, nkv: int,
           lens: list[int], qs: int, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Page attention: gather each batch's first lens[b] tokens as (L, KV_N, D)."""
    if table.dim() != 2 or table.dtype != torch.int32:  # [FIA] block_table: int32, "必须为二维"
        raise _err(f"block_table must be a 2-D int32 tensor, got {tuple(table.shape)} {table.dtype}")
    if qs > 1 and not (128 <= bs <= 512 and bs % 128 == 0):  # [FIA] Q_S > 1: "block_size最小为128, 最大为512, 且要求是128的倍数"
        raise _err(f"block_size={bs} with Q_S > 1 must be a multiple of 128 in 128..512; gather the pages or "
                   "use bigger pages")
    if qs == 1 and not (0 < bs <= 512 and bs % (32 if dtype == torch.int8 else 16) == 0):  # [FIA] Q_S == 1
        raise _err(f"block_size={bs} with Q_S == 1 must be non-zero, at most 512 and 16-aligned")
    if key.dim() == 3:  # (blocknum, blocksize, H)
        if key.shape[1] != bs or key.shape[2] % nkv:
            raise _err(f"paged key {tuple(key.shape)} must be (blocknum, block_size={bs}, KV_N*D)")
        k4 = key.reshape(key.shape[0], bs, nkv, -1)
        v4 = value.reshape(value.shape[0], bs, nkv, -1)
    elif key.dim() == 4:  # (blocknum, KV_N, blocksize, D): [FIA] "当query的input_layout为BSH、BSND时, kv cache排布只支持(blocknum, blocksize, H)"
        if layout not in ("BNSD", "BNSD_BSND") or key.shape[1] != nkv or key.shape[2] != bs:
            raise _err(f"paged key {tuple(key.shape)}: (blocknum, KV_N, blocksize, D) caches need input_layout "
                       "BNSD; with BSH/BSND pass (blocknum, block_size, KV_N*D)")
        k4, v4 = key.transpose(1, 2), value.transpose(1, 2)
    else:
        raise _err(f"paged key must be 3-D or 4-D, got {tuple(key.shape)}")
    need = [-(-n // bs) for n in lens]
    if table.shape[1] < max(need, default=0) or sum(need) > key.shape[0]:
        raise _err(f"block_table {tuple(table.shape)} / {key.shape[0]} blocks cannot hold actual_seq_lengths_kv={lens}")
    out = []
    for b, n in enumerate(lens):
        ids = table[b, : need[b]].long()
        out.append((k4.index_select(0, ids).flatten(0, 1)[:n], v4.index_select(0, ids).flatten(0, 1)[:n]))
    return out


def _mask_rows(mask: torch.Tensor, batch: int, qs: int) -> torch.Tensor:
    """sparse_mode 0/1 masks -> (B|1, Q_S', KV_S'). [FIA]: (1,Q_S,KV_S), (B,1,Q_S,KV_S), (1,1,Q_S,KV_S);
    "Q_S为1可支持传入(B,KV_S), Q_S大于1时可支持传入(Q_S,KV_S)"; S may be padded up ("可以向上取到对齐的S")."""
    if mask.dim() == 2:
        return mask.unsqueeze(1) if qs == 1 else mask.unsqueeze(0)
    if mask.dim() == 4 and mask.shape[1] == 1:
        mask = mask[:, 0]
    if mask.dim() != 3 or mask.shape[0] not in (1, batch):
        raise _err(f"atten_mask of shape {tuple(mask.shape)}: use (B, 1, Q_S, KV_S), (1, Q_S, KV_S) or (Q_S, KV_S)")
    return mask


def _allowed(mask: Optional[torch.Tensor], mode: int, sq: int, skv: int, pre: int, nxt: int) -> torch.Tensor:
    if mode in (0, 1) and mask is None:  # [FIA] mode 0 without a mask: "不做mask操作, 忽略pre_tokens和next_tokens"
        return torch.ones(sq, skv, dtype=torch.bool)
    if mode == 0:  # "传入完整的atten_mask矩阵(S1*S2), 表示pre_tokens和next_tokens之间的部分需要计算"
        return (mask == 0) & band(sq, skv, pre, nxt, bottom_right=False)
    if mode == 1:
        return mask == 0
    if mode == 2:
        return band(sq, skv, INT_MAX, 0, bottom_right=False)
    if mode == 3:
        return band(sq, skv, INT_MAX, 0, bottom_right=True)
    return band(sq, skv, pre, nxt, bottom_right=True)


def _check_tnd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, nkv: int, mode: int, mask: Optional[torch.Tensor],
               table: Optional[torch.Tensor]) -> None:
    """[FIA] "TND场景下query、key、value输入的综合限制" (and no page attention in TND on A2/A3)."""
    if table is not None:
        raise _err("input_layout='TND' with block_table: [FIA] lists TND without page attention for Atlas A2/A3 "
                   "(its Q_S == 1 notes say otherwise); use BSND with a (blocknum, block_size, H) cache")
    n = q.shape[1]
    bad = []
    if q.shape[0] > 65536:
        bad.append("T <= 65536")
    if n not in (8, 16, 32, 64, 128) or nkv != n or k.shape[1] != n:
        bad.append("N in 8/16/32/64/128 with Q_N == K_N == V_N")
    if q.shape[2] != 192 or k.shape[2] != 192 or v.shape[2] not in (128, 192):
        bad.append("Q_D == K_D == 192, V_D 128 or 192")
    if q.dtype != torch.bfloat16:
        bad.append("bfloat16 only")
    if not ((mode == 0 and mask is None) or (mode in (3, 4) and mask is not None)):
        bad.append("sparse_mode 0 without a mask, or 3/4 with the compressed mask")
    if bad:
        raise _err("input_layout='TND' is documented only for " + "; ".join(bad) + "; use BSND")


_NOT_SIMULATED = (
    "pse_shift", "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2", "quant_offset2",
    "antiquant_scale", "antiquant_offset", "query_padding_size", "kv_padding_size", "key_antiquant_scale",
    "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset", "key_shared_prefix",
    "value_shared_prefix", "actual_shared_prefix_len", "query_rope", "key_rope", "key_rope_antiquant_scale",
)


def npu_fused_infer_attention_score(
    query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None, actual_seq_lengths_kv=None,
    dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None, quant_offset2=None,
    antiquant_scale=None, antiquant_offset=None, block_table=None, query_padding_size=None, kv_padding_size=None,
    key_antiquant_scale=None, key_antiquant_offset=None, value_antiquant_scale=None, value_antiquant_offset=None,
    key_shared_prefix=None, value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None, key_rope=None,
    key_rope_antiquant_scale=None, num_heads=1, scale=1.0, pre_tokens=INT_MAX, next_tokens=INT_MAX,
    input_layout="BSH", num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0, antiquant_mode=0,
    softmax_lse_flag=False, key_antiquant_mode=0, value_antiquant_mode=0,
):
    """[FIA]: (attention_out, softmax_lse).

    attention_out: the query's shape (BNSD_BSND: BSND) with value's head dim, query's dtype. softmax_lse:
    float32 (B, N, Q_S, 1), TND (T, N, 1) with softmax_lse_flag; else [FIA] "输出shape为[1]的值为0的Tensor"
    ([META] gives an empty (0,) tensor for graphs; we follow the docs). Query rows past a batch's
    actual_seq_lengths are 0 (the docs say nothing about them).
    """
    given = {name: val for name, val in locals().items() if name in _NOT_SIMULATED and val is not None}
    if given:
        name = next(iter(given))
        raise CapabilityError(f"{_OP}: argument {name} is not simulated (CPU implementation of the documented "
                              f"operator: float16/bfloat16 attention only); pass {name}=None")
    mode, pre, nxt, heads = int(sparse_mode), int(pre_tokens), int(next_tokens), int(num_heads)
    if mode not in (0, 1, 2, 3, 4):  # [FIA] "当前仅支持取值0、1、2、3、4、9"; 9 (treeMask) needs MLA rope inputs
        raise CapabilityError(f"{_OP}: sparse_mode={mode} is not simulated; use 0-4")
    if input_layout not in _LAYOUTS:
        raise _err(f"input_layout={input_layout!r} is not one of {_LAYOUTS}")
    if query.dtype not in (torch.float16, torch.bfloat16) or key.dtype != query.dtype or value.dtype != query.dtype:
        raise _err(f"query/key/value must all be float16 or bfloat16 (int8 quantisation is not simulated), got "
                   f"{query.dtype}/{key.dtype}/{value.dtype}")
    nkv = int(num_key_value_heads) or heads  # [FIA] 0: "表示key/value和query的head个数相等"
    if heads <= 0 or heads % nkv or heads // nkv > 64:
        raise _err(f"num_heads={heads} must be a positive multiple of num_key_value_heads={nkv}, ratio <= 64")
    dev, dtype = query.device, query.dtype
    q, k, v, mask, table = host(query), host(key), host(value), host(atten_mask), host(block_table)
    if mode in (2, 3, 4):  # "不传入atten_mask或者传入的shape不正确报错"
        check_compressed_mask(mask, _OP, mode)
    if mode == 1 and mask is None:
        raise _err("sparse_mode=1 (allMask) needs the full atten_mask (Q_S, KV_S); \"必须传入完整的attenmask矩阵\"")
    qlens = int_list(_OP, "actual_seq_lengths", actual_seq_lengths)
    kvlens = int_list(_OP, "actual_seq_lengths_kv", actual_seq_lengths_kv)
    if input_layout == "TND":
        return _tnd(q, k, v, heads, nkv, mode, pre, nxt, mask, table, qlens, kvlens, float(scale),
                    bool(softmax_lse_flag), dev)
    q4 = _q_bsnd(q, input_layout, heads)
    batch, qs = q4.shape[0], q4.shape[1]
    if input_layout == "BNSD_BSND" and qs == 1:  # [FIA] "BNSD_BSND ... 仅支持Q_S大于1"
        raise _err("input_layout='BNSD_BSND' needs Q_S > 1; use BNSD for a single query")
    if qs == 1:
        # IncreFlashAttention: [FIA] actual_seq_lengths "Q_S为1时该参数无效"; pre/next_tokens "Q_S为1时该参数
        # 无效"; sparse_mode "Q_S为1且不带rope输入时该参数无效". A mask still applies (the (B, KV_S) shape).
        # Which mask a compressed 2048 mask would mean then is not documented: mode 3 (bottom-right causal)
        # keeps every key for the one last query under any reading; 2 and 4 could drop keys, so refuse them.
        if mode in (2, 4):
            raise _err(f"sparse_mode={mode} with Q_S == 1: the docs make sparse_mode and pre/next_tokens "
                       "ineffective there; pass a (B, KV_S) atten_mask with sparse_mode=0 to restrict keys")
        qlens, pre, nxt = [1] * batch, INT_MAX, INT_MAX
        if mode == 3:
            mode, mask = 0, None
    else:
        qlens = _per_batch("actual_seq_lengths", qlens, batch, qs)
    if table is not None:
        if kvlens is None:  # [FIA] "page attention场景下, 必须传入actual_seq_lengths_kv"
            raise _err("page attention (block_table) needs actual_seq_lengths_kv, one length per batch")
        if table.shape[0] != batch:
            raise _err(f"block_table has {table.shape[0]} rows for batch {batch} (\"第一维长度需等于B\")")
        kvlens = _per_batch("actual_seq_lengths_kv", kvlens, batch, table.shape[1] * int(block_size))
        kv = _pages(k, v, input_layout, table, int(block_size), nkv, kvlens, qs, q.dtype)
    else:
        k4, v4 = _kv_bsnd(k, input_layout, nkv, "key"), _kv_bsnd(v, input_layout, nkv, "value")
        if k4.shape[0] != batch or k4.shape[:3] != v4.shape[:3]:
            raise _err(f"key {tuple(key.shape)} / value {tuple(value.shape)} do not match the query's batch {batch}")
        kvlens = _per_batch("actual_seq_lengths_kv", kvlens, batch, k4.shape[1])
        kv = [(k4[b, :n], v4[b, :n]) for b, n in enumerate(kvlens)]
    if kv and kv[0][0].shape[-1] != q4.shape[-1]:
        raise _err(f"query head dim {q4.shape[-1]} != key head dim {kv[0][0].shape[-1]}")
    d = q4.shape[-1]
    # [FIA] "支持D轴小于等于512" (both branches); Q_S > 1: "输入类型全为float16、bfloat16时, D轴需16对齐"
    if d > 512 or (qs > 1 and d % 16):
        raise _err(f"head dim {d} must be at most 512{' and a multiple of 16 when Q_S > 1' if qs > 1 else ''}")
    rows = _mask_rows(mask, batch, qs) if (mode in (0, 1) and mask is not None) else None
    if rows is not None and table is not None:  # [FIA] page attention with a mask: "KV_S>=maxBlockNumPerSeq*blockSize"
        span = max((-(-n // int(block_size)) for n in kvlens), default=0) * int(block_size)
        if rows.shape[-1] < span:
            raise _err(f"atten_mask {tuple(mask.shape)} under page attention must span at least {span} keys "
                       "(the pages of the longest sequence)")
    dv = kv[0][1].shape[-1] if kv else q4.shape[-1]
    out = torch.zeros(batch, qs, heads, dv, dtype=torch.float32)
    lse = torch.zeros(batch, heads, qs, dtype=torch.float32)
    for b, ((kb, vb), sq) in enumerate(zip(kv, qlens)):
        skv = kb.shape[0]
        mb = None if rows is None else rows[min(b, rows.shape[0] - 1), :sq, :skv]
        if mb is not None and tuple(mb.shape) != (sq, skv):
            raise _err(f"atten_mask {tuple(mask.shape)} is smaller than batch {b}'s (Q_S, KV_S) = ({sq}, {skv})")
        o, _, _, l_ = attend_one(q4[b, :sq], kb, vb, float(scale), _allowed(mb, mode, sq, skv, pre, nxt))
        out[b, :sq], lse[b, :, :sq] = o, l_
    if input_layout == "BSH":
        res = out.reshape(batch, qs, heads * dv)
    elif input_layout == "BNSD":
        res = out.transpose(1, 2).contiguous()
    else:  # BSND, BNSD_BSND
        res = out
    lse_out = lse.unsqueeze(-1) if softmax_lse_flag else torch.zeros(1, dtype=torch.float32)
    return res.to(dtype).to(dev), lse_out.to(dev)


def _tnd(q, k, v, heads, nkv, mode, pre, nxt, mask, table, qlens, kvlens, scale, want_lse, dev):
    """TND: [FIA] actual_seq_lengths "以该入参元素的数量作为Batch值. 该入参中每个元素的值表示当前Batch与之前所有
    Batch的seqlen和"; actual_seq_lengths_kv likewise cumulative (non-paged). Both required."""
    if q.dim() != 3 or q.shape[1] != heads:
        raise _err(f"TND query must be (T, num_heads={heads}, D), got {tuple(q.shape)}")
    _check_tnd(q, k, v, nkv, mode, mask, table)
    if qlens is None or kvlens is None or len(qlens) != len(kvlens):
        raise _err("input_layout='TND' needs actual_seq_lengths and actual_seq_lengths_kv, cumulative ends, "
                   "one per batch (lengths [2, 3] -> [2, 5])")
    for name, ends, total in (("actual_seq_lengths", qlens, q.shape[0]), ("actual_seq_lengths_kv", kvlens, k.shape[0])):
        if any(b < a for a, b in zip([0] + ends, ends)) or (ends and ends[-1] > total):
            raise _err(f"{name}={ends} must be non-decreasing cumulative ends within {total} tokens")
    out = torch.zeros(q.shape[0], heads, v.shape[-1], dtype=torch.float32)
    lse = torch.zeros(q.shape[0], heads, dtype=torch.float32)
    for (qa, qb), (ka, kb) in zip(zip([0] + qlens, qlens), zip([0] + kvlens, kvlens)):
        sq, skv = qb - qa, kb - ka
        if mode == 3 and sq >= skv:  # [FIA] TND: "当sparse=3时, 要求每个batch单独的actual_seq_lengths < actual_seq_lengths_kv"
            raise _err(f"TND sparse_mode=3 needs each batch's query length below its key length, got {sq} >= {skv}")
        o, _, _, l_ = attend_one(q[qa:qb], k[ka:kb], v[ka:kb], scale, _allowed(None, mode, sq, skv, pre, nxt))
        out[qa:qb], lse[qa:qb] = o, l_.transpose(0, 1)
    lse_out = lse.unsqueeze(-1) if want_lse else torch.zeros(1, dtype=torch.float32)
    return out.to(q.dtype).to(dev), lse_out.to(dev)
