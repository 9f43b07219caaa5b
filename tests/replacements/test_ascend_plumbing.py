"""The ascend path's argument plumbing, against a recording stand-in of torch_npu.

What this proves (L0/L1-style, argument plumbing only): the replacements call the two fused operators
with the argument names, layouts and values that torch-npu 2.13.0's `_op_plugin_docs.py` documents.
The stand-in's functions carry the documented signatures (so a misspelt keyword fails) and emulate
the documented semantics with the float64 oracle (cumulative actual_seq_* lists, sparse_mode 0/3/4,
paged (blocknum, blocksize, H) caches), so a wrong value gives a wrong number. Nothing here runs
the real operators; that needs an Ascend machine.
"""

from __future__ import annotations

import math
import sys
import types

import pytest
import torch

from cudashim.errors import CapabilityError
from cudashim.platform import contract as _dispatch
from cudashim.replacements.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache
from cudashim.replacements.flash_attn_cute import _flash_attn_fwd

from replacements_ref import cu, make_paged, randn, ref_attention

INT_MAX = 2147483647


def _window(sparse_mode: int, pre: int, nxt: int, atten_mask) -> tuple[bool, tuple[int, int]]:
    if sparse_mode == 0:
        assert atten_mask is None, "this stand-in only models sparse_mode=0 without a mask"
        return False, (-1, -1)
    assert atten_mask is not None and atten_mask.shape == (2048, 2048) and atten_mask.dtype == torch.bool
    assert torch.equal(atten_mask, torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1))
    if sparse_mode == 3:
        return True, (-1, -1)
    assert sparse_mode == 4
    return False, (-1 if pre == INT_MAX else pre, -1 if nxt == INT_MAX else nxt)


class FakeTorchNpu(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("torch_npu")
        self.calls: list[tuple[str, tuple, dict]] = []

    # signature as documented in _op_plugin_docs.py (torch-npu 2.13.0)
    def npu_fusion_attention(self, query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                             atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=INT_MAX, next_tockens=INT_MAX,
                             inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                             sparse_mode=0, gen_mask_parallel=True, sync=False, softmax_layout=""):
        self.calls.append(("npu_fusion_attention", (query, key, value, head_num, input_layout),
                           {k: v for k, v in locals().items() if k not in ("self", "query", "key", "value",
                                                                       "head_num", "input_layout")}))
        causal, window = _window(sparse_mode, pre_tockens, next_tockens, atten_mask)
        assert query.shape[-2] == head_num
        if input_layout == "TND":
            assert isinstance(actual_seq_qlen, list) and isinstance(actual_seq_kvlen, list)
            qe, ke = [0] + actual_seq_qlen, [0] + actual_seq_kvlen
            out = torch.cat([
                ref_attention(query[qe[i]:qe[i + 1]], key[ke[i]:ke[i + 1]], value[ke[i]:ke[i + 1]],
                              scale=scale, causal=causal, window=window)[0]
                for i in range(len(actual_seq_qlen))
            ]).to(query.dtype)
        else:
            assert input_layout == "BSND"
            out = torch.stack([ref_attention(query[b], key[b], value[b], scale=scale, causal=causal,
                                             window=window)[0] for b in range(query.shape[0])]).to(query.dtype)
        return out, None, None, None, 0, 0, 0

    def npu_fused_infer_attention_score(self, query, key, value, *, pse_shift=None, atten_mask=None,
                                        actual_seq_lengths=None, actual_seq_lengths_kv=None, dequant_scale1=None,
                                        quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                                        quant_offset2=None, antiquant_scale=None, antiquant_offset=None,
                                        block_table=None, query_padding_size=None, kv_padding_size=None,
                                        key_antiquant_scale=None, key_antiquant_offset=None,
                                        value_antiquant_scale=None, value_antiquant_offset=None,
                                        key_shared_prefix=None, value_shared_prefix=None,
                                        actual_shared_prefix_len=None, query_rope=None, key_rope=None,
                                        key_rope_antiquant_scale=None, num_heads=1, scale=1.0,
                                        pre_tokens=INT_MAX, next_tokens=INT_MAX, input_layout="BSH",
                                        num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
                                        antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=0,
                                        value_antiquant_mode=0):
        kw = {k: v for k, v in locals().items() if k not in ("self", "query", "key", "value")}
        self.calls.append(("npu_fused_infer_attention_score", (query, key, value), kw))
        assert input_layout == "BSND"
        b, sq, n, d = query.shape
        nkv = num_key_value_heads or n
        causal, window = (False, (-1, -1)) if sq == 1 else _window(sparse_mode, pre_tokens, next_tokens, atten_mask)
        outs, lses = [], []
        for i in range(b):
            L = actual_seq_lengths_kv[i]
            if block_table is not None:  # (blocknum, blocksize, H) pages, H = Nkv * D
                assert key.dim() == 3 and key.shape[1] == block_size and key.shape[2] == nkv * d
                pages = [int(p) for p in block_table[i, : -(-L // block_size)]]
                ki = torch.cat([key[p] for p in pages])[:L].view(L, nkv, d)
                vi = torch.cat([value[p] for p in pages])[:L].view(L, nkv, -1)
            else:
                ki, vi = key[i, :L], value[i, :L]
            o, l = ref_attention(query[i], ki, vi, scale=scale, causal=causal, window=window)
            outs.append(o)
            lses.append(l)
        out = torch.stack(outs).to(query.dtype)
        lse = torch.stack(lses).unsqueeze(-1).float() if softmax_lse_flag else torch.zeros(1)
        return out, lse


@pytest.fixture
def npu(monkeypatch):
    fake = FakeTorchNpu()
    monkeypatch.setitem(sys.modules, "torch_npu", fake)
    monkeypatch.setattr(_dispatch, "platform_name", lambda: "ascend")
    return fake


@pytest.mark.parametrize("as_list", [True, False])
def test_fa4_vision_call_is_the_documented_tnd_call(npu, as_list):
    gen = torch.Generator().manual_seed(31)
    lens = [16, 4, 9]
    heads, d = 4, 64
    q, k, v = (randn((sum(lens), heads, d), torch.float16, gen) for _ in range(3))
    ends = [16, 20, 29]
    cu_arg = ends if as_list else cu(lens)  # seed engine: host list of ends; flash-attn: (B+1,) tensor
    out, lse = _flash_attn_fwd(q, k, v, cu_seqlens_q=cu_arg)
    assert lse is None
    (name, args, kw), = npu.calls
    assert name == "npu_fusion_attention"
    assert args[0] is q and args[1] is k and args[2] is v and args[3] == heads and args[4] == "TND"
    assert kw["scale"] == pytest.approx(1 / math.sqrt(d))
    assert kw["actual_seq_qlen"] == ends and kw["actual_seq_kvlen"] == ends
    assert kw["sparse_mode"] == 0 and kw["atten_mask"] is None
    starts = [0] + ends
    for i in range(3):
        ro, _ = ref_attention(q[starts[i]:ends[i]], k[starts[i]:ends[i]], v[starts[i]:ends[i]], scale=d**-0.5)
        torch.testing.assert_close(out[starts[i]:ends[i]].double(), ro, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("block", [None, 16])
def test_varlen_prefill_is_causal_rightdown_tnd(npu, block):
    gen = torch.Generator().manual_seed(32)
    lq, lk = [3, 1, 7], [10, 1, 7]
    q = randn((sum(lq), 8, 64), torch.bfloat16, gen)
    ks = [randn((n, 2, 64), torch.bfloat16, gen) for n in lk]
    vs = [randn((n, 2, 64), torch.bfloat16, gen) for n in lk]
    if block is None:
        out = flash_attn_varlen_func(q, torch.cat(ks), torch.cat(vs), cu(lq), cu(lk), 7, 10, causal=True)
    else:
        p = make_paged(ks, vs, block, gen)
        out = flash_attn_varlen_func(q, p.k_cache, p.v_cache, cu(lq), cu(lk), 7, 10, causal=True,
                                     block_table=p.block_table)
    (name, args, kw), = npu.calls
    assert name == "npu_fusion_attention" and args[3] == 8 and args[4] == "TND"
    assert kw["sparse_mode"] == 3  # rightDownCausal == flash-attn's bottom-right causal
    assert kw["actual_seq_qlen"] == [3, 4, 11] and kw["actual_seq_kvlen"] == [10, 11, 18]
    assert args[1].shape == (18, 2, 64)  # paged pages were gathered: the docs exclude page attention in TND
    cq = cu(lq).tolist()
    for i in range(3):
        ro, _ = ref_attention(q[cq[i]:cq[i + 1]], ks[i], vs[i], scale=0.125, causal=True)
        torch.testing.assert_close(out[cq[i]:cq[i + 1]].double(), ro, rtol=1e-2, atol=1e-2)


def test_sliding_window_is_band_mode(npu):
    gen = torch.Generator().manual_seed(33)
    q, k, v = (randn((12, 2, 64), torch.float16, gen) for _ in range(3))
    flash_attn_varlen_func(q, k, v, cu([12]), cu([12]), 12, 12, causal=True, window_size=(4, -1))
    (_, _, kw), = npu.calls
    assert kw["sparse_mode"] == 4 and kw["pre_tockens"] == 4 and kw["next_tockens"] == 0


@pytest.mark.parametrize("block", [16, 128])
def test_paged_decode_is_fused_infer_attention_with_block_table(npu, block):
    gen = torch.Generator().manual_seed(34)
    hq, hk, d = 8, 2, 64
    lens = [5, 33, 1]
    ks = [randn((n, hk, d), torch.bfloat16, gen) for n in lens]
    vs = [randn((n, hk, d), torch.bfloat16, gen) for n in lens]
    p = make_paged(ks, vs, block, gen)
    q = randn((3, 1, hq, d), torch.bfloat16, gen)
    out, lse = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                       block_table=p.block_table, softmax_scale=0.1, causal=True,
                                       return_softmax_lse=True)
    (name, args, kw), = npu.calls
    assert name == "npu_fused_infer_attention_score"
    assert kw["input_layout"] == "BSND" and kw["num_heads"] == hq and kw["num_key_value_heads"] == hk
    assert kw["block_size"] == block and kw["actual_seq_lengths_kv"] == lens
    assert kw["block_table"].dtype == torch.int32 and kw["softmax_lse_flag"] is True
    assert args[1].shape == (p.k_cache.shape[0], block, hk * d)  # BSND paged cache is (blocks, block_size, H)
    assert kw["sparse_mode"] == 0 and kw["atten_mask"] is None  # Q_S == 1: the docs ignore masks
    assert lse.shape == (3, hq, 1)
    for i in range(3):
        ro, rl = ref_attention(q[i], ks[i], vs[i], scale=0.1, causal=True)
        torch.testing.assert_close(out[i].double(), ro, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(lse[i].double(), rl, rtol=1e-4, atol=1e-4)


def test_unsupported_arguments_raise_naming_them(npu):
    q = torch.zeros(4, 2, 64, dtype=torch.float16)
    with pytest.raises(CapabilityError, match="alibi_slopes.*ascend"):
        flash_attn_varlen_func(q, q, q, cu([4]), cu([4]), 4, 4, alibi_slopes=torch.ones(2))
    with pytest.raises(CapabilityError, match="return_attn_probs.*ascend"):
        flash_attn_varlen_func(q, q, q, cu([4]), cu([4]), 4, 4, return_attn_probs=True)
    with pytest.raises(CapabilityError, match="learnable_sink"):
        _flash_attn_fwd(q, q, q, cu_seqlens_q=cu([4]), learnable_sink=torch.zeros(2))
    assert npu.calls == []


def test_chunked_decode_with_small_pages_gathers_and_masks_bottom_right(npu):
    """Q_S > 1 with pages of 16: the docs want block_size % 128 == 0 there, so the pages are gathered."""
    gen = torch.Generator().manual_seed(35)
    lens = [9, 40]
    ks = [randn((n, 1, 64), torch.float16, gen) for n in lens]
    vs = [randn((n, 1, 64), torch.float16, gen) for n in lens]
    p = make_paged(ks, vs, 16, gen)
    q = randn((2, 3, 4, 64), torch.float16, gen)
    out = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                  block_table=p.block_table, causal=True)
    (name, args, kw), = npu.calls
    assert name == "npu_fused_infer_attention_score" and kw["block_table"] is None
    assert args[1].dim() == 4 and kw["actual_seq_lengths_kv"] == lens
    assert kw["sparse_mode"] == 3 and kw["atten_mask"].shape == (2048, 2048)
    for i in range(2):
        ro, _ = ref_attention(q[i], ks[i], vs[i], scale=0.125, causal=True)
        torch.testing.assert_close(out[i].double(), ro, rtol=1e-2, atol=1e-2)


def test_single_query_sliding_window_travels_as_a_mask(npu):
    """The docs ignore sparse_mode and pre_tokens when Q_S == 1: the window goes as a (B, 1, 1, KV_S) mask."""
    cache = torch.zeros(2, 8, 1, 64, dtype=torch.float16)
    q = torch.zeros(2, 1, 1, 64, dtype=torch.float16)
    flash_attn_with_kvcache(q, cache, cache, cache_seqlens=torch.tensor([8, 3], dtype=torch.int32), causal=True,
                            window_size=(4, 0))
    (_, _, kw), = npu.calls
    assert kw["sparse_mode"] == 0 and kw["atten_mask"].shape == (2, 1, 1, 8)
    masked = kw["atten_mask"].view(2, 8)
    assert masked[0].tolist() == [True] * 3 + [False] * 5  # query at 7 sees keys 3..7
    assert masked[1].tolist() == [False] * 8  # query at 2 sees 0..2 (the rest lies past actual_seq_lengths_kv)
