"""The user-side adapter a patch map points nano-vllm's Triton KV-store launcher at.

nano-vllm's `store_kvcache(key, value, k_cache, v_cache, slot_mapping)` launches a Triton kernel,
which has no CPU or Ascend build. This adapter keeps its signature and calls the platform's own
`store_kv_cache_tl` through `cudashim.kernels.ops` (torch on cpu, AscendC on ascend, TileLang CUDA
on nvidia) — the kind of five-line shim a user writes once, next to the patch map.
"""

from __future__ import annotations

import torch

from cudashim.kernels import ops


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor) -> None:
    n, heads, head_dim = key.shape
    store = ops.store_kv_cache_tl(heads * head_dim, k_cache.shape[1], dtype=str(key.dtype).removeprefix("torch."))
    store(key, k_cache, slot_mapping)
    store(value, v_cache, slot_mapping)
