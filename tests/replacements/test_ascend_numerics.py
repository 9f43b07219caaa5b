"""The ascend path of the replacements, numerically: flash-attn semantics through the NPU operators and back.

test_ascend_plumbing.py checks which arguments the replacements pass; this runs the same path with the
simulated operators (cudashim.emulated.npu.ops, CPU implementations of the documented torch_npu
operators, themselves tested against their docs in test_npu_operators_sim.py) standing in for
torch_npu's, and compares what comes back with the float64 flash-attn oracle (replacements_ref). A wrong
mapping (layout, cumulative lengths, sparse_mode, window origin, page layout, lse layout) gives a
wrong number here. What this is not: a run on an NPU, or of the real operators (L0 + this check).
deep_select.topk and the KV-cache rotary call no NPU operator (plain torch on every platform), so they have
no mapping to check here; test_npu_operators_sim.py asserts these two operators are all the shim calls.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from cudashim.emulated.npu import ops
from cudashim.platform import contract as _dispatch
from cudashim.replacements.flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
from cudashim.replacements.flash_attn_cute import _flash_attn_fwd

from replacements_ref import cu, make_paged, randn, ref_attention, tolerance


@pytest.fixture
def npu(monkeypatch):
    sim = types.ModuleType("torch_npu")
    calls: list[str] = []
    for name, fn in ops.OPERATORS.items():
        def op(*a, _fn=fn, _name=name, **kw):
            calls.append(_name)
            return _fn(*a, **kw)
        setattr(sim, name, op)
    sim.calls = calls
    monkeypatch.setitem(sys.modules, "torch_npu", sim)
    monkeypatch.setattr(_dispatch, "platform_name", lambda: "ascend")
    return sim


def _seqs(lens, h, d, dtype, gen):
    return [randn((n, h, d), dtype, gen) for n in lens]


CASES = [  # (lq, lk, hq, hk, causal, window, dtype, block)
    ([3, 1, 7], [10, 1, 7], 8, 2, True, (-1, -1), torch.bfloat16, None),
    ([5, 9], [5, 9], 4, 4, False, (-1, -1), torch.float16, None),
    ([6, 2], [3, 9], 4, 1, True, (-1, -1), torch.float16, None),  # 6 queries, 3 keys: rows with no key
    ([3, 1, 7], [10, 1, 7], 8, 2, True, (-1, -1), torch.float16, 16),
    ([4, 12], [20, 12], 4, 2, True, (3, -1), torch.float16, None),   # sliding window, causal
    ([4, 12], [20, 12], 4, 2, False, (2, 3), torch.bfloat16, None),  # two-sided window
    ([4, 12], [20, 12], 4, 2, False, (-1, 2), torch.float16, 16),
]


@pytest.mark.parametrize("lq,lk,hq,hk,causal,window,dtype,block", CASES)
def test_varlen_through_npu_fusion_attention(npu, lq, lk, hq, hk, causal, window, dtype, block):
    gen = torch.Generator().manual_seed(sum(lq) * 31 + sum(lk))
    q = torch.cat(_seqs(lq, hq, 64, dtype, gen))
    ks, vs = _seqs(lk, hk, 64, dtype, gen), _seqs(lk, hk, 64, dtype, gen)
    kw = dict(causal=causal, window_size=window, softmax_scale=0.07)
    if block is None:
        out = flash_attn_varlen_func(q, torch.cat(ks), torch.cat(vs), cu(lq), cu(lk), max(lq), max(lk), **kw)
    else:
        p = make_paged(ks, vs, block, gen)
        out = flash_attn_varlen_func(q, p.k_cache, p.v_cache, cu(lq), cu(lk), max(lq), max(lk),
                                     block_table=p.block_table, **kw)
    assert npu.calls == ["npu_fusion_attention"]
    starts = cu(lq).tolist()
    for i in range(len(lq)):
        ro, _ = ref_attention(q[starts[i]:starts[i + 1]], ks[i], vs[i], scale=0.07, causal=causal, window=window)
        torch.testing.assert_close(out[starts[i]:starts[i + 1]].double(), ro, **tolerance(dtype))


@pytest.mark.parametrize("causal", [True, False])
def test_dense_flash_attn_func_through_bsnd(npu, causal):
    gen = torch.Generator().manual_seed(5)
    q = randn((2, 5, 4, 32), torch.float16, gen)
    k, v = randn((2, 9, 2, 32), torch.float16, gen), randn((2, 9, 2, 32), torch.float16, gen)
    out = flash_attn_func(q, k, v, causal=causal)
    for b in range(2):
        ro, _ = ref_attention(q[b], k[b], v[b], scale=32 ** -0.5, causal=causal)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.float16))


@pytest.mark.parametrize("sq,block", [(1, 16), (1, 128), (1, 8), (3, 16), (3, 128), (3, 1024), (4, None), (1, None)])
def test_kvcache_through_npu_fused_infer_attention_score(npu, sq, block):
    gen = torch.Generator().manual_seed(sq * 100 + (block or 0))
    hq, hk, d = 8, 2, 64
    lens = [5, 140, 1 + sq]
    ks, vs = _seqs(lens, hk, d, torch.bfloat16, gen), _seqs(lens, hk, d, torch.bfloat16, gen)
    q = randn((3, sq, hq, d), torch.bfloat16, gen)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    if block is None:
        cap = 160
        kc = randn((4, cap, hk, d), torch.bfloat16, gen)  # one spare row: the cache outlives the batch
        vc = randn((4, cap, hk, d), torch.bfloat16, gen)
        for b, n in enumerate(lens):
            kc[b, :n], vc[b, :n] = ks[b], vs[b]
        out, lse = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, softmax_scale=0.11, causal=True,
                                           return_softmax_lse=True)
    else:
        p = make_paged(ks, vs, block, gen)
        out, lse = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=seqlens, block_table=p.block_table,
                                           softmax_scale=0.11, causal=True, return_softmax_lse=True)
    assert npu.calls == ["npu_fused_infer_attention_score"]
    assert lse.shape == (3, hq, sq)
    for b in range(3):
        ro, rl = ref_attention(q[b], ks[b], vs[b], scale=0.11, causal=True)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.bfloat16))
        torch.testing.assert_close(lse[b].double(), rl, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block", [128, 16])
def test_chunked_kvcache_with_a_sliding_window_is_band_mode(npu, block):
    gen = torch.Generator().manual_seed(block)
    lens, sq = [9, 150], 5
    ks, vs = _seqs(lens, 2, 64, torch.float16, gen), _seqs(lens, 2, 64, torch.float16, gen)
    p = make_paged(ks, vs, block, gen)
    q = randn((2, sq, 4, 64), torch.float16, gen)
    out = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                  block_table=p.block_table, causal=True, window_size=(6, 0))
    for b in range(2):
        ro, _ = ref_attention(q[b], ks[b], vs[b], scale=0.125, causal=True, window=(6, 0))
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.float16))


def test_kvcache_rows_picked_by_cache_batch_idx_non_causal(npu):
    gen = torch.Generator().manual_seed(13)
    lens, sq = [6, 11], 3
    ks, vs = _seqs(lens, 2, 64, torch.float16, gen), _seqs(lens, 2, 64, torch.float16, gen)
    kc, vc = randn((3, 16, 2, 64), torch.float16, gen), randn((3, 16, 2, 64), torch.float16, gen)
    rows = [2, 0]
    for b, n in enumerate(lens):
        kc[rows[b], :n], vc[rows[b], :n] = ks[b], vs[b]
    q = randn((2, sq, 4, 64), torch.float16, gen)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                  cache_batch_idx=torch.tensor(rows, dtype=torch.int32), softmax_scale=0.2)
    for b in range(2):
        ro, _ = ref_attention(q[b], ks[b], vs[b], scale=0.2)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.float16))


def test_kvcache_appends_new_keys_then_attends(npu):
    gen = torch.Generator().manual_seed(9)
    hq, hk, d, block = 4, 1, 64, 16
    old, new = [7, 30], 2
    ks, vs = _seqs([n + new for n in old], hk, d, torch.float16, gen), _seqs([n + new for n in old], hk, d, torch.float16, gen)
    p = make_paged([k[:n] for k, n in zip(ks, old)], [v[:n] for v, n in zip(vs, old)], block, gen,
                   capacity=[n + new for n in old])
    q = randn((2, new, hq, d), torch.float16, gen)
    knew = torch.stack([k[n:] for k, n in zip(ks, old)])
    vnew = torch.stack([v[n:] for v, n in zip(vs, old)])
    out = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, k=knew, v=vnew, cache_seqlens=torch.tensor(old, dtype=torch.int32),
                                  block_table=p.block_table, causal=True)
    for b in range(2):
        ro, _ = ref_attention(q[b], ks[b], vs[b], scale=d ** -0.5, causal=True)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.float16))


def test_fa4_vision_self_attention_through_tnd(npu):
    gen = torch.Generator().manual_seed(11)
    lens = [16, 4, 9]
    q, k, v = (randn((sum(lens), 4, 64), torch.float16, gen) for _ in range(3))
    out, _ = _flash_attn_fwd(q, k, v, cu_seqlens_q=[16, 20, 29], softmax_scale=0.1)
    s = cu(lens).tolist()
    for i in range(3):
        ro, _ = ref_attention(q[s[i]:s[i + 1]], k[s[i]:s[i + 1]], v[s[i]:s[i + 1]], scale=0.1)
        torch.testing.assert_close(out[s[i]:s[i + 1]].double(), ro, **tolerance(torch.float16))


def test_fa4_seqused_k_limits_the_keys(npu):
    """flash-attn 4: seqused_k[b] keys of sequence b are used, the rest of its rows are not read."""
    gen = torch.Generator().manual_seed(12)
    q = randn((2, 3, 4, 64), torch.float16, gen)
    k, v = randn((2, 10, 2, 64), torch.float16, gen), randn((2, 10, 2, 64), torch.float16, gen)
    used = torch.tensor([4, 10], dtype=torch.int32)
    out, _ = _flash_attn_fwd(q, k, v, seqused_k=used, causal=True)
    for b, n in enumerate(used.tolist()):
        ro, _ = ref_attention(q[b], k[b, :n], v[b, :n], scale=64 ** -0.5, causal=True)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.float16))


@pytest.mark.parametrize("block", [None, 16, 8])
def test_decode_with_a_sliding_window_masks_the_keys_left_of_it(npu, block):
    """Q_S == 1: the docs ignore sparse_mode/pre_tokens there, so the window travels as a (B, 1, 1, KV_S) mask."""
    gen = torch.Generator().manual_seed(21)
    lens = [3, 40]
    ks, vs = _seqs(lens, 2, 64, torch.float16, gen), _seqs(lens, 2, 64, torch.float16, gen)
    q = randn((2, 1, 4, 64), torch.float16, gen)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    if block is None:
        kc, vc = torch.zeros(2, 48, 2, 64, dtype=torch.float16), torch.zeros(2, 48, 2, 64, dtype=torch.float16)
        for b, n in enumerate(lens):
            kc[b, :n], vc[b, :n] = ks[b], vs[b]
        out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, window_size=(5, 0))
    else:
        p = make_paged(ks, vs, block, gen)
        out = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=seqlens, block_table=p.block_table,
                                      causal=True, window_size=(5, 0))
    for b in range(2):
        ro, _ = ref_attention(q[b], ks[b], vs[b], scale=0.125, causal=True, window=(5, 0))
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.float16))


@pytest.mark.parametrize("window", [(-1, -1), (6, 0)])
def test_paged_decode_inside_an_npu_graph_capture_reads_lengths_on_the_device(npu, monkeypatch, window):
    """While a capture is open the decode must not read cache_seqlens to the host (a synchronising copy the
    capture refuses; host lengths would be replayed stale): actual_seq_lengths_kv is the block table's
    width for every sequence and a device mask hides the keys past each length (and left of the window).
    The result is the float64 oracle's, block-table padding (-1) included."""
    from cudashim.replacements import _attn_ascend

    monkeypatch.setattr(_attn_ascend, "_capturing", lambda: True)
    seen: list[dict] = []
    fia = npu.npu_fused_infer_attention_score
    monkeypatch.setattr(npu, "npu_fused_infer_attention_score", lambda *a, **kw: seen.append(kw) or fia(*a, **kw))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: pytest.fail("read a tensor to the host"))
    gen = torch.Generator().manual_seed(7)
    hq, hk, d, block = 8, 2, 64, 16
    lens = [5, 140, 2]
    ks, vs = _seqs(lens, hk, d, torch.bfloat16, gen), _seqs(lens, hk, d, torch.bfloat16, gen)
    q = randn((3, 1, hq, d), torch.bfloat16, gen)
    # FIA: "blocknum不能小于...每个batch的block数量之和": every sequence now counts the table's whole width
    p = make_paged(ks, vs, block, gen, spare_blocks=16)
    assert (p.block_table < 0).any() and p.k_cache.shape[0] >= 3 * p.block_table.shape[1]
    out = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                  block_table=p.block_table, softmax_scale=0.11, causal=True, window_size=window)
    assert seen[0]["actual_seq_lengths_kv"] == [p.block_table.shape[1] * block] * 3
    for b in range(3):
        ro, _ = ref_attention(q[b], ks[b], vs[b], scale=0.11, causal=True, window=window)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(torch.bfloat16))
