"""A fast LLM-generation program in the style of gpt-fast, written for CUDA.

A tiny Llama-shaped transformer with random weights and a static KV cache. The prefill is compiled
with dynamic shapes (one compiled graph for every prompt length), the one-token decode step with
mode="reduce-overhead" (Inductor's CUDA graph trees: each step replays a recorded graph), and the
decode runs SDPA's math backend, as gpt-fast does. Tokens are chosen greedily, so a run is
deterministic: `python examples/gpt_fast.py` prints the tokens of two prompts of different lengths.

    python -m cudashim run examples/gpt_fast.py            # on the emulated CUDA device
    python examples/gpt_fast.py --device cpu               # the same program on the CPU
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


@dataclass
class ModelArgs:
    vocab_size: int = 96
    n_layer: int = 2
    n_head: int = 4
    dim: int = 32
    intermediate_size: int = 64
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_head


class KVCache(nn.Module):
    def __init__(self, max_batch_size: int, max_seq_length: int, n_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        shape = (max_batch_size, n_heads, max_seq_length, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype))

    def update(self, input_pos: torch.Tensor, k_val: torch.Tensor, v_val: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k_out, v_out = self.k_cache, self.v_cache
        k_out[:, :, input_pos] = k_val
        v_out[:, :, input_pos] = v_val
        return k_out, v_out


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.weight


def precompute_freqs_cis(seq_len: int, n_elem: int, base: float) -> torch.Tensor:
    freqs = 1.0 / (base ** (torch.arange(0, n_elem, 2)[: (n_elem // 2)].float() / n_elem))
    t = torch.arange(seq_len, device=freqs.device)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    return torch.stack([freqs_cis.real, freqs_cis.imag], dim=-1)


def apply_rotary_emb(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    out = torch.stack([xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
                       xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1]], -1)
    return out.flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, config: ModelArgs) -> None:
        super().__init__()
        self.wqkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.wo = nn.Linear(config.dim, config.dim, bias=False)
        self.kv_cache: KVCache | None = None
        self.n_head, self.head_dim, self.dim = config.n_head, config.head_dim, config.dim

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor, mask: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        bsz, seqlen, _ = x.shape
        q, k, v = self.wqkv(x).split([self.dim, self.dim, self.dim], dim=-1)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim)
        k = k.view(bsz, seqlen, self.n_head, self.head_dim)
        v = v.view(bsz, seqlen, self.n_head, self.head_dim)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        assert self.kv_cache is not None
        k, v = self.kv_cache.update(input_pos, k, v)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return self.wo(y.transpose(1, 2).contiguous().view(bsz, seqlen, self.dim))


class FeedForward(nn.Module):
    def __init__(self, config: ModelArgs) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.intermediate_size, bias=False)
        self.w3 = nn.Linear(config.dim, config.intermediate_size, bias=False)
        self.w2 = nn.Linear(config.intermediate_size, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, config: ModelArgs) -> None:
        super().__init__()
        self.attention, self.feed_forward = Attention(config), FeedForward(config)
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)

    def forward(self, x: torch.Tensor, input_pos: torch.Tensor, freqs_cis: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, config: ModelArgs) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.max_seq_length = -1

    def setup_caches(self, max_batch_size: int, max_seq_length: int) -> None:
        self.max_seq_length = max_seq_length
        dtype = self.output.weight.dtype
        for b in self.layers:
            b.attention.kv_cache = KVCache(max_batch_size, max_seq_length, self.config.n_head, self.config.head_dim, dtype)
        self.freqs_cis = precompute_freqs_cis(max_seq_length, self.config.head_dim, self.config.rope_base)
        self.causal_mask = torch.tril(torch.ones(max_seq_length, max_seq_length, dtype=torch.bool))

    def forward(self, idx: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        mask = self.causal_mask[None, None, input_pos]
        freqs_cis = self.freqs_cis[input_pos]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, input_pos, freqs_cis, mask)
        return self.output(self.norm(x))


def sample(logits: torch.Tensor) -> torch.Tensor:
    return torch.argmax(logits[:, -1], dim=-1, keepdim=True).to(torch.int)


def prefill(model: Transformer, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
    return sample(model(x, input_pos))


def decode_one_token(model: Transformer, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
    assert input_pos.shape[-1] == 1
    return sample(model(x, input_pos))


def decode_n_tokens(model: Transformer, cur_token: torch.Tensor, input_pos: torch.Tensor, num_new_tokens: int,
                    decode: object) -> list[torch.Tensor]:
    new_tokens = []
    for _ in range(num_new_tokens):
        with sdpa_kernel(SDPBackend.MATH):  # gpt-fast decodes with the math backend
            next_token = decode(model, cur_token, input_pos)  # type: ignore[operator]
        input_pos += 1
        new_tokens.append(next_token.clone())
        cur_token = next_token.clone()
    return new_tokens


@torch.no_grad()
def generate(model: Transformer, prompt: torch.Tensor, max_new_tokens: int, prefill_fn: object, decode_fn: object) -> torch.Tensor:
    device = prompt.device
    T = prompt.size(0)
    seq = torch.empty(T + max_new_tokens, dtype=prompt.dtype, device=device)
    seq[:T] = prompt
    input_pos = torch.arange(0, T, device=device)
    next_token = prefill_fn(model, prompt.view(1, -1), input_pos).clone()  # type: ignore[operator]
    seq[T] = next_token.view(())
    input_pos = torch.tensor([T], device=device, dtype=torch.int)
    tokens = decode_n_tokens(model, next_token.view(1, -1), input_pos, max_new_tokens - 1, decode_fn)
    seq[T + 1:] = torch.cat(tokens).view(-1)
    return seq


def main(device: str = "cuda", max_new_tokens: int = 6) -> list[list[int]]:
    torch.manual_seed(0)
    config = ModelArgs()
    with torch.device(device):
        model = Transformer(config)
        model.setup_caches(max_batch_size=1, max_seq_length=32)
    model.eval()
    prefill_fn = torch.compile(prefill, fullgraph=True, dynamic=True)
    decode_fn = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
    out = []
    for prompt in ([5, 17, 3, 42, 8], [7, 1, 60, 2, 33, 9, 14, 21]):
        seq = generate(model, torch.tensor(prompt, dtype=torch.int, device=device), max_new_tokens, prefill_fn, decode_fn)
        out.append(seq.tolist())
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-new-tokens", type=int, default=6)
    a = parser.parse_args()
    for tokens in main(a.device, a.max_new_tokens):
        print(" ".join(map(str, tokens)))
