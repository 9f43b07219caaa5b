"""flash_attn_with_kvcache: in-place append, paged and unpaged caches, rotary, LSE (cpu path, L3)."""

from __future__ import annotations

import math

import pytest
import torch

from cudashim.errors import CapabilityError
from cudashim.replacements.flash_attn import flash_attn_with_kvcache

from replacements_ref import make_paged, randn, ref_attention, tolerance


def _rope_ref(x: torch.Tensor, pos: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Textbook rotary on (S, H, D) at integer positions, written channel pair by channel pair."""
    out = x.double().clone()
    half = cos.shape[1]
    for s in range(x.shape[0]):
        c, sn = cos[pos[s]].double(), sin[pos[s]].double()
        for i in range(half):
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
            xa, xb = x[s, :, a].double(), x[s, :, b].double()
            out[s, :, a] = xa * c[i] - xb * sn[i]
            out[s, :, b] = xa * sn[i] + xb * c[i]
    return out


@pytest.mark.parametrize("block", [None, 16, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_append_in_place_then_attend(block, dtype):
    gen = torch.Generator().manual_seed(11)
    hq, hk, d = 8, 2, 128
    old = [5, 1, 40]
    new = 2
    ks = [randn((n + new, hk, d), dtype, gen) for n in old]
    vs = [randn((n + new, hk, d), dtype, gen) for n in old]
    q = randn((3, new, hq, d), dtype, gen)
    k_new = torch.stack([kb[n:] for kb, n in zip(ks, old)])
    v_new = torch.stack([vb[n:] for vb, n in zip(vs, old)])
    seqlens = torch.tensor(old, dtype=torch.int32)
    if block is None:
        cap = 48
        k_cache = randn((3, cap, hk, d), dtype, gen)
        v_cache = randn((3, cap, hk, d), dtype, gen)
        for b, n in enumerate(old):
            k_cache[b, :n], v_cache[b, :n] = ks[b][:n], vs[b][:n]
        table = None
    else:
        paged = make_paged([kb[:n] for kb, n in zip(ks, old)], [vb[:n] for vb, n in zip(vs, old)], block, gen,
                           capacity=[n + new for n in old])
        k_cache, v_cache, table = paged.k_cache, paged.v_cache, paged.block_table
    k_ptr = k_cache.data_ptr()
    out, lse = flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, block_table=table,
        causal=True, return_softmax_lse=True,
    )
    assert k_cache.data_ptr() == k_ptr
    for b, n in enumerate(old):  # the new tokens are in the caller's cache, where flash-attn puts them
        for t in range(new):
            if table is None:
                got_k, got_v = k_cache[b, n + t], v_cache[b, n + t]
            else:
                page = int(table[b, (n + t) // block])
                got_k, got_v = k_cache[page, (n + t) % block], v_cache[page, (n + t) % block]
            assert torch.equal(got_k, k_new[b, t]) and torch.equal(got_v, v_new[b, t])
        ro, rl = ref_attention(q[b], ks[b], vs[b], scale=d**-0.5, causal=True)
        torch.testing.assert_close(out[b].double(), ro, **tolerance(dtype))
        torch.testing.assert_close(lse[b].double(), rl, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_rotary_rotates_q_and_new_k_at_cache_positions(interleaved, causal):
    gen = torch.Generator().manual_seed(12)
    hq, hk, d, rd = 2, 1, 64, 32
    old, new = [3, 7], 2
    cap = 16
    k_cache = randn((2, cap, hk, d), torch.float32, gen)
    v_cache = randn((2, cap, hk, d), torch.float32, gen)
    k_old = k_cache.clone()
    q = randn((2, new, hq, d), torch.float32, gen)
    k_new = randn((2, new, hk, d), torch.float32, gen)
    v_new = randn((2, new, hk, d), torch.float32, gen)
    theta = torch.arange(cap).double().view(-1, 1) * (1.0 / 10000 ** (torch.arange(rd // 2).double() / (rd // 2)))
    cos, sin = theta.cos().float(), theta.sin().float()
    seqlens = torch.tensor(old, dtype=torch.int32)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, rotary_cos=cos, rotary_sin=sin,
                                  cache_seqlens=seqlens, causal=causal, rotary_interleaved=interleaved)
    for b, n in enumerate(old):
        kpos = torch.arange(n, n + new)
        qpos = kpos if causal else torch.full((new,), n)
        k_rot = _rope_ref(k_new[b], kpos, cos, sin, interleaved)
        q_rot = _rope_ref(q[b], qpos, cos, sin, interleaved)
        torch.testing.assert_close(k_cache[b, n:n + new].double(), k_rot, rtol=1e-5, atol=1e-5)
        keys = torch.cat([k_old[b, :n].double(), k_rot])
        vals = torch.cat([v_cache[b, :n].double(), v_new[b].double()])
        ro, _ = ref_attention(q_rot, keys, vals, scale=d**-0.5, causal=causal)
        torch.testing.assert_close(out[b].double(), ro, rtol=1e-5, atol=1e-5)


def test_cache_batch_idx_picks_cache_rows():
    gen = torch.Generator().manual_seed(13)
    k_cache = randn((4, 10, 1, 64), torch.float32, gen)
    v_cache = randn((4, 10, 1, 64), torch.float32, gen)
    q = randn((2, 1, 2, 64), torch.float32, gen)
    idx = torch.tensor([3, 1], dtype=torch.int32)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([4, 9], dtype=torch.int32),
                                  cache_batch_idx=idx)
    for b, (row, n) in enumerate(zip([3, 1], [4, 9])):
        ro, _ = ref_attention(q[b], k_cache[row, :n], v_cache[row, :n], scale=0.125)
        torch.testing.assert_close(out[b].double(), ro, rtol=1e-5, atol=1e-5)


def test_int_cache_seqlens_window_and_a_cache_larger_than_the_batch():
    gen = torch.Generator().manual_seed(14)
    k_cache = randn((5, 12, 2, 64), torch.float32, gen)  # room for 5 sequences, 2 in this batch
    v_cache = randn((5, 12, 2, 64), torch.float32, gen)
    q = randn((2, 3, 2, 64), torch.float32, gen)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=9, causal=True, window_size=(4, 0))
    for b in range(2):
        ro, _ = ref_attention(q[b], k_cache[b, :9], v_cache[b, :9], scale=0.125, causal=True, window=(4, 0))
        torch.testing.assert_close(out[b].double(), ro, rtol=1e-5, atol=1e-5)


def test_unsupported_and_inconsistent_arguments_are_named():
    z = torch.zeros(1, 1, 1, 64)
    cache = torch.zeros(1, 4, 1, 64)
    with pytest.raises(CapabilityError, match="cache_leftpad"):
        flash_attn_with_kvcache(z, cache, cache, cache_seqlens=1, cache_leftpad=torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="both k and v"):
        flash_attn_with_kvcache(z, cache, cache, k=z, cache_seqlens=1)
    with pytest.raises(ValueError, match="cache_seqlens"):
        flash_attn_with_kvcache(z, cache, cache, k=z, v=z)
    assert math.isfinite(float(flash_attn_with_kvcache(z, cache, cache, cache_seqlens=2).sum()))
