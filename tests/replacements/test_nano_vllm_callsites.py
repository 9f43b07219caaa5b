"""nano-vllm's two attention call sites, replayed through the replacements (cpu path, L3).

Shapes and arguments are those of nanovllm/layers/attention.py (nano-vllm-fork 20260210):
  prefill: flash_attn_varlen_func(q, k, v, max_seqlen_q=…, cu_seqlens_q=…, max_seqlen_k=…,
           cu_seqlens_k=…, softmax_scale=…, causal=True, block_table=…) where, with a prefix cache
           (cu_seqlens_k[-1] > cu_seqlens_q[-1]), k/v ARE the paged cache (num_blocks, block_size, Hk, D)
           and block_table rows are padded with -1 (model_runner.prepare_block_tables)
  decode:  flash_attn_with_kvcache(q.unsqueeze(1), k_cache, v_cache, cache_seqlens=context_lens,
           block_table=block_tables, softmax_scale=…, causal=True)
The KV cache is filled the way store_kvcache does (flat slot = block * block_size + offset). The
float64 oracle reads each sequence's unpaged K/V; "same tokens" = the argmax of a fixed LM head.
"""

from __future__ import annotations

import pytest
import torch

from cudashim.replacements.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache

from replacements_ref import randn, ref_attention, tolerance

HQ, HK, D, VOCAB = 8, 2, 64, 512


def _store_kvcache(k, v, k_cache, v_cache, slot_mapping):
    """nano-vllm's Triton store_kvcache in torch: one (Hk*D) row per slot, -1 skipped."""
    keep = slot_mapping >= 0
    kc = k_cache.view(-1, HK * D)
    vc = v_cache.view(-1, HK * D)
    kc[slot_mapping[keep].long()] = k[keep].reshape(-1, HK * D)
    vc[slot_mapping[keep].long()] = v[keep].reshape(-1, HK * D)


def _tokens(o: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    return (o.double().reshape(o.shape[0], -1) @ head).argmax(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block_size", [256, 16])
def test_prefix_cached_prefill_then_decode(dtype, block_size):
    gen = torch.Generator().manual_seed(21)
    scale = D ** -0.5
    lens = [300, 5, 530]                    # prompt lengths
    cached = [block_size, 0, 2 * block_size]  # prefix-cache hits: whole blocks, as the block manager gives
    cached = [min(c, (n - 1) // block_size * block_size) for c, n in zip(cached, lens)]
    num_blocks = 16 + sum(-(-(n + 1) // block_size) for n in lens)
    k_cache = torch.zeros(num_blocks, block_size, HK, D, dtype=dtype)
    v_cache = torch.zeros_like(k_cache)
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables = []
    for n in lens:
        need = -(-(n + 1) // block_size)  # room for the decode token
        tables.append([perm.pop() for _ in range(need)])
    ks = [randn((n + 1, HK, D), dtype, gen) for n in lens]  # every token's key, incl. the decode one
    vs = [randn((n + 1, HK, D), dtype, gen) for n in lens]
    qs = [randn((n + 1, HQ, D), dtype, gen) for n in lens]
    head = torch.randn(HQ * D, VOCAB, generator=gen, dtype=torch.float64)

    def slot(b, t):
        return tables[b][t // block_size] * block_size + t % block_size

    # the cached prefix is already in the cache from an earlier request
    for b, c in enumerate(cached):
        _store_kvcache(ks[b][:c], vs[b][:c], k_cache, v_cache, torch.tensor([slot(b, t) for t in range(c)]))
    max_blocks = max(len(t) for t in tables)
    block_tables = torch.tensor([t + [-1] * (max_blocks - len(t)) for t in tables], dtype=torch.int32)

    # ---- prefill (model_runner.prepare_prefill) ----
    q = torch.cat([qs[b][cached[b]:lens[b]] for b in range(3)])
    k = torch.cat([ks[b][cached[b]:lens[b]] for b in range(3)])
    v = torch.cat([vs[b][cached[b]:lens[b]] for b in range(3)])
    slots = torch.tensor([slot(b, t) for b in range(3) for t in range(cached[b], lens[b])], dtype=torch.int32)
    cu_q = torch.tensor([0] + torch.tensor([n - c for n, c in zip(lens, cached)]).cumsum(0).tolist(), dtype=torch.int32)
    cu_k = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    _store_kvcache(k, v, k_cache, v_cache, slots)
    assert cu_k[-1] > cu_q[-1]  # nano-vllm passes the block table (prefix cache) only in this case
    o = flash_attn_varlen_func(q, k_cache, v_cache,
                               max_seqlen_q=max(n - c for n, c in zip(lens, cached)), cu_seqlens_q=cu_q,
                               max_seqlen_k=max(lens), cu_seqlens_k=cu_k,
                               softmax_scale=scale, causal=True, block_table=block_tables)
    ref = torch.cat([
        ref_attention(qs[b][cached[b]:lens[b]], ks[b][:lens[b]], vs[b][:lens[b]], scale=scale, causal=True)[0]
        for b in range(3)
    ])
    torch.testing.assert_close(o.double(), ref, **tolerance(dtype))
    if dtype == torch.float32:
        assert torch.equal(_tokens(o, head), _tokens(ref, head))

    # ---- decode (model_runner.prepare_decode): one new token per sequence ----
    qd = torch.stack([qs[b][lens[b]] for b in range(3)])            # (B, Hq, D)
    kd = torch.stack([ks[b][lens[b]] for b in range(3)])
    vd = torch.stack([vs[b][lens[b]] for b in range(3)])
    _store_kvcache(kd, vd, k_cache, v_cache, torch.tensor([slot(b, lens[b]) for b in range(3)]))
    context_lens = torch.tensor([n + 1 for n in lens], dtype=torch.int32)
    od = flash_attn_with_kvcache(qd.unsqueeze(1), k_cache, v_cache, cache_seqlens=context_lens,
                                 block_table=block_tables, softmax_scale=scale, causal=True)
    assert od.shape == (3, 1, HQ, D)
    ref_d = torch.cat([ref_attention(qs[b][lens[b]:lens[b] + 1], ks[b], vs[b], scale=scale, causal=True)[0]
                       for b in range(3)])
    torch.testing.assert_close(od[:, 0].double(), ref_d, **tolerance(dtype))
    if dtype == torch.float32:
        assert torch.equal(_tokens(od[:, 0], head), _tokens(ref_d, head))
