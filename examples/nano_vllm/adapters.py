"""User-side adapters the example's patch map (cudashim.toml) points nano-vllm at.

1. nano-vllm's `store_kvcache(key, value, k_cache, v_cache, slot_mapping)` launches a Triton kernel,
which has no CPU or Ascend build. This adapter keeps its signature and calls the platform's own
`store_kv_cache_tl` through `cudashim.kernels.ops` (torch on cpu, AscendC on ascend, TileLang CUDA
on nvidia) — the kind of five-line shim a user writes once, next to the patch map.

2. nano-vllm-fork 20260210 picks its NCCL rendezvous port per rank (`find_available_port` scans from
2333 for a free one). The main process (rank 0) starts listening before the spawned rank 1 looks, so
rank 1 picks 2334 and waits forever for a store nobody hosts — on a CUDA box as much as here. Every
rank must agree; the port below is derived from the engine's main process id, which all ranks know.
This is a bug in the subject, not something the shim does; it is patched here, in plain sight.

3. The same release pickles only token bookkeeping when rank 0 sends a Sequence to the other ranks
(`Sequence.__getstate__`), but `ModelRunner.run` reads `seq.cfg_scale` and `seq.paired_seq` on every
rank, so rank 1 dies with AttributeError at its first step — again on any platform. The dropped
fields get their no-CFG defaults after the original `__setstate__` ran.

4. The same release reads `config.rope_theta` (default 1e6 when absent) and refuses any
`config.rope_scaling`. transformers 5 moves the RoPE base into `rope_scaling` (the dict
`{"rope_theta": ..., "rope_type": "default"}`) and drops `rope_theta`: the model would fail to build
(an unhashable dict in an lru_cache), and with the dict dropped would rotate with the wrong base. Plain
RoPE given that way is turned back into the base it names; any other rope type still goes to the
original, which refuses it as before. (The attention layer's constructor is patched, where both
values arrive, rather than `get_rope`: that one is wrapped in functools.lru_cache, and the patch map
replaces only plain functions in a module's namespace.)
"""

from __future__ import annotations

import multiprocessing
import os

import torch

import cudashim
from cudashim.kernels import ops


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor) -> None:
    n, heads, head_dim = key.shape
    store = ops.store_kv_cache_tl(heads * head_dim, k_cache.shape[1], dtype=str(key.dtype).removeprefix("torch."))
    store(key, k_cache, slot_mapping)
    store(value, v_cache, slot_mapping)


def find_available_port(start_port: int = 2333, max_attempts: int = 100) -> int:
    parent = multiprocessing.parent_process()
    root = parent.pid if parent is not None else os.getpid()
    return start_port + 10_000 + root % 20_000


def sequence_setstate(self, state) -> None:
    cudashim.original("nanovllm.engine.sequence:Sequence.__setstate__")(self, state)
    self.cfg_scale, self.paired_seq, self.is_unconditional = 1.0, None, False


def qwen3_attention_init(self, *args, rope_theta: float = 10000, rope_scaling=None, **kwargs) -> None:
    if isinstance(rope_scaling, dict) and rope_scaling.get("rope_type", "default") == "default":
        rope_theta, rope_scaling = float(rope_scaling.get("rope_theta", rope_theta)), None
    cudashim.original("nanovllm.models.qwen3:Qwen3Attention.__init__")(
        self, *args, rope_theta=rope_theta, rope_scaling=rope_scaling, **kwargs)
