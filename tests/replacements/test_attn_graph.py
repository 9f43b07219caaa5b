"""_attn_graph.paged_decode (the CUDA-graph-safe decode of the emulated device) against the general
flash_attn_with_kvcache path on the same paged caches: lengths from 1 to a full table, -1 padding."""

from __future__ import annotations

import pytest
import torch

from cudashim.replacements._attn_graph import paged_decode
from cudashim.replacements.flash_attn import flash_attn_with_kvcache


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_paged_decode_matches_the_general_path(dtype):
    gen = torch.Generator().manual_seed(3)
    b, hq, hk, d, bs, nblocks, width = 4, 8, 2, 64, 16, 12, 3
    k_cache = torch.randn(nblocks, bs, hk, d, generator=gen).to(dtype)
    v_cache = torch.randn(nblocks, bs, hk, d, generator=gen).to(dtype)
    q = torch.randn(b, 1, hq, d, generator=gen).to(dtype)
    lens = torch.tensor([1, 17, 48, 5], dtype=torch.int32)
    table = torch.full((b, width), -1, dtype=torch.int32)  # nano-vllm pads unused entries with -1
    perm = torch.randperm(nblocks, generator=gen).int()
    used = 0
    for i, n in enumerate(lens.tolist()):
        k = (n + bs - 1) // bs
        table[i, :k] = perm[used:used + k]
        used += k
    want, want_lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                             softmax_scale=0.125, causal=True, return_softmax_lse=True)
    got, lse = paged_decode(q, k_cache, v_cache, table, lens, 0.125)
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(lse, want_lse.reshape(b, hq).float(), atol=1e-4, rtol=1e-4)
