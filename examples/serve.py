"""A small CUDA-written inference loop, unchanged on any machine: `python -m cudashim run examples/serve.py`.

A tiny decoder-only transformer built from a config with random weights (pure torch), served the way
real engines do it: device="cuda", set_device(local_rank), an NCCL process group (world size 1, or N
under torchrun), memory queries that size the KV cache, prompts copied with .cuda(non_blocking=True)
from pinned host buffers, a side torch.cuda.Stream for the device->host copy of sampled tokens,
torch.cuda.Event timing, torch.compile on a layer, and `from flash_attn import flash_attn_varlen_func`
for attention (prefill and decode). On a GPU it runs as written; under the shim on cpu, torch.cuda
is the CPU and flash_attn is served by cudashim's portable implementation.

    python -m cudashim run examples/serve.py
    python -m cudashim run torchrun --standalone --nproc_per_node=2 examples/serve.py
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from flash_attn import flash_attn_varlen_func


@dataclass(frozen=True)
class Config:
    vocab_size: int = 512
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 256
    max_len: int = 128
    eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


class MLP(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.gate_up = nn.Linear(cfg.hidden, 2 * cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.norm1 = nn.Parameter(torch.ones(cfg.hidden))
        self.norm2 = nn.Parameter(torch.ones(cfg.hidden))
        self.qkv = nn.Linear(cfg.hidden, (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, bias=False)
        self.o = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: int,
                cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int) -> torch.Tensor:
        cfg = self.cfg
        batch = k_cache.shape[0]
        h = rms_norm(x, self.norm1, cfg.eps)
        q, k, v = self.qkv(h).split([cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim,
                                     cfg.kv_heads * cfg.head_dim], dim=-1)
        q = q.view(-1, cfg.heads, cfg.head_dim)
        k = k.view(batch, -1, cfg.kv_heads, cfg.head_dim)
        v = v.view(batch, -1, cfg.kv_heads, cfg.head_dim)
        new = k.shape[1]
        k_cache[:, pos:pos + new] = k  # write this step's keys/values into the cache
        v_cache[:, pos:pos + new] = v
        length = pos + new
        keys = k_cache[:, :length].reshape(-1, cfg.kv_heads, cfg.head_dim)
        values = v_cache[:, :length].reshape(-1, cfg.kv_heads, cfg.head_dim)
        attn = flash_attn_varlen_func(q, keys, values, cu_q, cu_k, max_q, length, causal=True)
        x = x + self.o(attn.reshape(-1, cfg.heads * cfg.head_dim))
        return x + self.mlp(rms_norm(x, self.norm2, cfg.eps))


class TinyLM(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.Parameter(torch.ones(cfg.hidden))
        self.head = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)

    def forward(self, ids: torch.Tensor, kv: list[tuple[torch.Tensor, torch.Tensor]], pos: int) -> torch.Tensor:
        batch, new = ids.shape
        device = ids.device
        cu_q = torch.arange(0, (batch + 1) * new, new, dtype=torch.int32, device=device)
        cu_k = torch.arange(0, (batch + 1) * (pos + new), pos + new, dtype=torch.int32, device=device)
        x = self.embed(ids.reshape(-1))
        for block, (k_cache, v_cache) in zip(self.blocks, kv):
            x = block(x, k_cache, v_cache, pos, cu_q, cu_k, new)
        last = x.view(batch, new, -1)[:, -1]
        return self.head(rms_norm(last, self.norm, self.cfg.eps))


def build_model(cfg: Config, device: str, dtype: torch.dtype, compile_layer: bool) -> TinyLM:
    torch.manual_seed(0)
    model = TinyLM(cfg).to(device=device, dtype=dtype).eval()
    for p in model.parameters():
        p.data.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    if compile_layer:
        model.blocks[0].mlp = torch.compile(model.blocks[0].mlp)  # one layer, as engines compile hot parts
    return model


def kv_cache_slots(cfg: Config, dtype: torch.dtype, wanted: int, utilization: float) -> int:
    """Size the KV cache from the memory queries, the way vLLM / nano-vllm do."""
    free, total = torch.cuda.mem_get_info()
    used = total - free
    stats = torch.cuda.memory_stats()
    peak, current = stats["allocated_bytes.all.peak"], stats["allocated_bytes.all.current"]
    per_slot = 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * torch.tensor([], dtype=dtype).element_size()
    budget = int(total * utilization - used - peak + current)
    slots = budget // per_slot
    if slots < wanted:
        raise SystemExit(f"serve: KV cache needs {wanted} slots, memory allows {slots}")
    return wanted


def generate(model: TinyLM, prompts: torch.Tensor, new_tokens: int, device: str,
             cuda_apis: bool = True) -> tuple[torch.Tensor, float]:
    """Greedy decoding; returns (generated ids on the host, decode milliseconds).

    cuda_apis=False is the same loop written for a CPU (no streams, no events, no pinning):
    the benchmark's baseline.
    """
    cfg = model.cfg
    batch, prompt_len = prompts.shape
    kv = [(torch.empty(batch, cfg.max_len, cfg.kv_heads, cfg.head_dim, device=device, dtype=model.head.weight.dtype),
           torch.empty(batch, cfg.max_len, cfg.kv_heads, cfg.head_dim, device=device, dtype=model.head.weight.dtype))
          for _ in range(cfg.layers)]
    if cuda_apis:
        ids = prompts.pin_memory().cuda(non_blocking=True)
        copy_stream = torch.cuda.Stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        out_host = torch.empty(batch, new_tokens, dtype=torch.long, pin_memory=True)
    else:
        ids = prompts.to(device)
        out_host = torch.empty(batch, new_tokens, dtype=torch.long)
    with torch.inference_mode():
        logits = model(ids, kv, 0)
        pos = prompt_len
        if cuda_apis:
            start.record()
        else:
            t0 = time.perf_counter()
        for step in range(new_tokens):
            next_ids = logits.argmax(-1, keepdim=True)
            if cuda_apis:
                copy_stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(copy_stream):  # device->host copy off the compute stream
                    out_host[:, step:step + 1].copy_(next_ids, non_blocking=True)
                next_ids.record_stream(copy_stream)  # keep its memory until the copy is done
            else:
                out_host[:, step:step + 1].copy_(next_ids)
            if step + 1 < new_tokens:
                logits = model(next_ids, kv, pos)
                pos += 1
        if cuda_apis:
            torch.cuda.current_stream().wait_stream(copy_stream)  # the last copy is part of the work timed
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            ms = (time.perf_counter() - t0) * 1000.0
    return out_host, ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile of the first layer")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"],
                    help="model dtype (bfloat16, as engines serve; flash-attn kernels take no float32)")
    args = ap.parse_args(argv)
    cfg = Config(max_len=args.prompt_len + args.new_tokens)
    dtype = getattr(torch, args.dtype)

    assert torch.cuda.is_available(), "serve.py is written for CUDA"
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    device = f"cuda:{local_rank}"
    if "WORLD_SIZE" in os.environ:  # torchrun
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True

    model = build_model(cfg, device, dtype, compile_layer=not args.no_compile)
    kv_cache_slots(cfg, dtype, args.batch * cfg.max_len, utilization=0.9)
    gen = torch.Generator(device="cpu").manual_seed(1234 + rank)
    prompts = torch.randint(0, cfg.vocab_size, (args.batch, args.prompt_len), generator=gen)

    generate(model, prompts, 4, device)  # warm-up: compiles the layer, touches every path
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    out, decode_ms = generate(model, prompts, args.new_tokens, device)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0

    tokens = torch.tensor([out.numel()], device="cuda", dtype=torch.float64)
    dist.all_reduce(tokens)  # tokens generated by all ranks
    tps = torch.tensor([out.numel() / seconds], device="cuda", dtype=torch.float64)
    dist.all_reduce(tps)
    if rank == 0:
        print(f"serve: {world} rank(s) on {torch.cuda.get_device_name(local_rank)}: {int(tokens.item())} tokens, "
              f"{tps.item():.1f} tokens/s (decode {decode_ms / args.new_tokens:.2f} ms/step by CUDA events; "
              f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB)", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
