"""flash-attn 2 replacements against the float64 oracle over a sampled grid (cpu path, L3).

Grid: batch {1, 3, 8} x heads {MHA 4/4, GQA 8/2, MQA 4/1} x head_dim {64, 128, 256} x causal
alignment {seqlen_q == seqlen_k, bottom-right with seqlen_q != seqlen_k} x dtype {fp32, bf16, fp16}
x KV {packed, paged block 16, paged block 256} x causal {on, off}: 972 points, 40 sampled with a fixed
seed (every value of every axis is covered, checked below) to keep CI time small.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from cudashim.errors import CapabilityError
from cudashim.replacements.flash_attn import flash_attn_func, flash_attn_varlen_func

from replacements_ref import cu, make_paged, randn, ref_attention, tolerance

BATCH = (1, 3, 8)
HEADS = ((4, 4), (8, 2), (4, 1))
DIMS = (64, 128, 256)
ALIGN = ("equal", "bottom_right")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
KV = (None, 16, 256)
CAUSAL = (True, False)
AXES = (BATCH, HEADS, DIMS, ALIGN, DTYPES, KV, CAUSAL)

_ALL = list(itertools.product(*AXES))
GRID = random.Random(7).sample(_ALL, 40)


def test_the_sample_covers_every_value_of_every_axis():
    for axis, values in enumerate(AXES):
        assert {point[axis] for point in GRID} == set(values)


def _lengths(batch: int, align: str, rng: random.Random) -> tuple[list[int], list[int]]:
    """Ragged lengths; the first sequence always has one query (a decode-like row)."""
    pool = [1, 2, 17, 64, 100, 190]
    lq = [1] + [rng.choice(pool) for _ in range(batch - 1)]
    if align == "equal":
        return lq, list(lq)
    # bottom-right: most sequences have more keys than queries (prefix cache), one has fewer
    lk = [n + rng.choice([0, 5, 80, 300]) for n in lq]
    if batch > 1:
        lk[-1] = max(1, lq[-1] // 2) if lq[-1] > 1 else 1
    return lq, lk


@pytest.mark.parametrize("batch,heads,d,align,dtype,block,causal", GRID, ids=lambda x: str(x).replace("torch.", ""))
def test_varlen_matches_float64_reference(batch, heads, d, align, dtype, block, causal):
    rng = random.Random(hash((batch, heads, d, align, str(dtype), block, causal)) & 0xFFFF)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    hq, hk = heads
    lq, lk = _lengths(batch, align, rng)
    qs = [randn((n, hq, d), dtype, gen) for n in lq]
    ks = [randn((n, hk, d), dtype, gen) for n in lk]
    vs = [randn((n, hk, d), dtype, gen) for n in lk]
    scale = 1.0 / math.sqrt(d) * rng.choice([1.0, 0.5])
    q = torch.cat(qs)
    kwargs = dict(max_seqlen_q=max(lq), max_seqlen_k=max(lk), softmax_scale=scale, causal=causal)
    if block is None:
        out = flash_attn_varlen_func(q, torch.cat(ks), torch.cat(vs), cu(lq), cu(lk), **kwargs)
    else:
        paged = make_paged(ks, vs, block, gen)
        out = flash_attn_varlen_func(
            q, paged.k_cache, paged.v_cache, cu(lq), cu(lk), block_table=paged.block_table, **kwargs
        )
    assert out.shape == q.shape and out.dtype == dtype
    expected = torch.cat([ref_attention(qb, kb, vb, scale=scale, causal=causal)[0] for qb, kb, vb in zip(qs, ks, vs)])
    torch.testing.assert_close(out.double(), expected, **tolerance(dtype))


def test_causal_alignment_is_bottom_right_and_empty_rows_are_zero():
    """flash-attn's docstring example: seqlen_q=5, seqlen_k=2 keeps only the last two rows."""
    gen = torch.Generator().manual_seed(0)
    q = randn((1, 5, 2, 64), torch.float32, gen)
    k = randn((1, 2, 2, 64), torch.float32, gen)
    v = randn((1, 2, 2, 64), torch.float32, gen)
    out, lse, probs = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert torch.all(out[0, :3] == 0)
    assert torch.all(torch.isinf(lse[0, :, :3])) and torch.all(lse[0, :, :3] > 0)
    # row 3 sees key 0 only, row 4 sees both (bottom-right), not top-left's "row 0 sees key 0"
    torch.testing.assert_close(out[0, 3], v[0, 0])
    assert torch.all(probs[0, :, 3, 1] == 0) and torch.all(probs[0, :, 4] > 0)


@pytest.mark.parametrize("case", ["window", "softcap", "alibi", "lse"])
def test_dense_features_match_reference(case):
    gen = torch.Generator().manual_seed(1)
    b, sq, sk, hq, hk, d = 2, 9, 13, 4, 2, 64
    q = randn((b, sq, hq, d), torch.float32, gen)
    k = randn((b, sk, hk, d), torch.float32, gen)
    v = randn((b, sk, hk, d), torch.float32, gen)
    kw: dict = {"causal": True}
    ref_kw: dict = {"causal": True}
    if case == "window":
        kw, ref_kw = {"window_size": (3, 2)}, {"window": (3, 2)}
    elif case == "softcap":
        kw["softcap"] = ref_kw["softcap"] = 2.5
    elif case == "alibi":
        slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
        kw["alibi_slopes"] = ref_kw["alibi"] = slopes
    out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    for i in range(b):
        ro, rl = ref_attention(q[i], k[i], v[i], scale=d**-0.5, **ref_kw)
        torch.testing.assert_close(out[i].double(), ro, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse[i].double(), rl, rtol=1e-5, atol=1e-5)


def test_varlen_lse_layout_is_heads_by_total_q():
    gen = torch.Generator().manual_seed(2)
    lq, lk = [3, 1, 6], [5, 4, 6]
    q = randn((sum(lq), 4, 64), torch.float32, gen)
    k = randn((sum(lk), 2, 64), torch.float32, gen)
    v = randn((sum(lk), 2, 64), torch.float32, gen)
    out, lse, _ = flash_attn_varlen_func(q, k, v, cu(lq), cu(lk), 6, 6, causal=True, return_attn_probs=True)
    assert lse.shape == (4, sum(lq))
    cq, ck = cu(lq).tolist(), cu(lk).tolist()
    for b in range(3):
        _, rl = ref_attention(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], scale=0.125, causal=True)
        torch.testing.assert_close(lse[:, cq[b]:cq[b + 1]].double(), rl, rtol=1e-5, atol=1e-5)


def test_gradients_flow_through_the_portable_path():
    gen = torch.Generator().manual_seed(3)
    q = randn((1, 3, 2, 8), torch.float64, gen).requires_grad_()
    k = randn((1, 4, 1, 8), torch.float64, gen).requires_grad_()
    v = randn((1, 4, 1, 8), torch.float64, gen).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attn_func(a, b, c, causal=True), (q, k, v), fast_mode=True)


def test_bad_head_ratio_names_the_heads():
    q = torch.zeros(1, 2, 3, 64)
    k = torch.zeros(1, 2, 2, 64)
    with pytest.raises(ValueError, match="multiple of k/v heads"):
        flash_attn_func(q, k, k)


def test_ascend_rejects_softcap_by_name(monkeypatch):
    from cudashim.platform import contract as _dispatch

    monkeypatch.setattr(_dispatch, "platform_name", lambda: "ascend")
    q = torch.zeros(1, 2, 2, 64)
    with pytest.raises(CapabilityError, match="softcap.*ascend"):
        flash_attn_func(q, q, q, softcap=1.0)


def test_block_table_with_packed_kv_is_refused_by_name():
    q = torch.zeros(4, 2, 64)
    with pytest.raises(ValueError, match="block_table"):
        flash_attn_varlen_func(q, q, q, cu([4]), cu([4]), 4, 4, block_table=torch.zeros(1, 1, dtype=torch.int32))
