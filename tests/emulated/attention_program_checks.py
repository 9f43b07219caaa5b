"""Attention in whole programs, written as plain CUDA code: each check passes on a real GPU and must pass on
the emulated device. test_attention_programs.py runs them on the emulated device, and with no shim where
torch.cuda is really available, so CUDA itself is the oracle:

    CUDASHIM_DISABLE=1 python tests/emulated/_runner.py attention_program_checks

The scripts are the ones a generation program and a pre-training framework reduce to: a compiled module
writing its KV cache in place and reading it with SDPA under CUDA graphs, compiled SDPA with a mask
trained, compiled flex attention trained, and the variable-length attention API.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


class _KVCache(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, 2, 48, 8))
        self.wq = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q = self.wq(x).view(1, x.shape[1], 2, 8).transpose(1, 2)
        self.k_cache[:, :, pos] = q
        return F.scaled_dot_product_attention(q, self.k_cache, self.k_cache)


def _replays_read_the_cache(dynamic: bool) -> None:
    import torch._inductor.config as ic

    torch._dynamo.reset()
    torch.manual_seed(0)
    with torch.no_grad(), torch._inductor.config.patch({"triton.cudagraphs": True}):
        assert ic.triton.cudagraphs
        mod = _KVCache().cuda()
        g = torch.compile(mod, fullgraph=True, dynamic=dynamic)
        x = torch.randn(1, 8, 16, device="cuda")
        pos = torch.arange(8, device="cuda")
        for i in range(4):  # warm-up, recording, replays: the program zeroes the cache before each
            mod.k_cache.zero_()
            out = g(x, pos).clone()
            mod.k_cache.zero_()
            ref = mod(x, pos)
            assert torch.allclose(out, ref, atol=1e-4), (i, (out - ref).abs().max())


@check
def cudagraphs_replay_reads_the_kv_cache_written_between_calls() -> None:
    _replays_read_the_cache(dynamic=False)


@check
def cudagraphs_replay_reads_the_kv_cache_dynamic() -> None:
    _replays_read_the_cache(dynamic=True)


@check
def graph_replay_of_flash_attention_reads_updated_inputs() -> None:
    """torch.cuda.graph around SDPA's flash operator (what compiled SDPA calls): each replay attends over
    what q, k, v hold then."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flash = torch.ops.aten._scaled_dot_product_flash_attention
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        flash(q, k, v, 0.0, True)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, lse = flash(q, k, v, 0.0, True)[:2]
    for _ in range(2):
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
        g.replay()
        want, want_lse = flash(q, k, v, 0.0, True)[:2]
        assert torch.equal(out, want) and torch.equal(lse, want_lse), (out - want).abs().max()


def _masked_sdpa_trains(dtype: torch.dtype, dynamic: bool) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    f = torch.compile(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), dynamic=dynamic)
    q, k, v = (torch.randn(2, 4, 32, 16, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    m = torch.randn(32, 32, device="cuda") > 0
    m.fill_diagonal_(True)
    got = f(q, k, v, m)
    got.float().square().sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    want.float().square().sum().backward()
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    assert torch.allclose(got.float(), want.float(), atol=tol, rtol=tol), (got.float() - want.float()).abs().max()
    for g, t in zip(grads, (q, k, v)):
        assert torch.allclose(g.float(), t.grad.float(), atol=tol * 10, rtol=tol * 10), (g.float() - t.grad.float()).abs().max()


@check
def compiled_sdpa_with_mask_trains_float32() -> None:
    _masked_sdpa_trains(torch.float32, dynamic=False)


@check
def compiled_sdpa_with_mask_trains_bfloat16() -> None:
    _masked_sdpa_trains(torch.bfloat16, dynamic=False)


@check
def compiled_sdpa_with_mask_trains_dynamic() -> None:
    _masked_sdpa_trains(torch.float32, dynamic=True)


def _flex_like_causal_sdpa(dynamic: bool) -> None:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.reset()

    def causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return q >= kv

    torch.manual_seed(3)
    n = 256
    mask = create_block_mask(causal, 1, 1, n, n, device="cuda")
    q, k, v = (torch.randn(2, 4, n, 32, device="cuda", requires_grad=True) for _ in range(3))
    out = torch.compile(flex_attention, dynamic=dynamic)(q, k, v, block_mask=mask)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = torch.autograd.grad(ref, (q, k, v), g)
    assert out.device.type == "cuda" and torch.allclose(out, ref, atol=1e-4, rtol=1e-4), (out - ref).abs().max()
    for a, b in zip(got, want):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), (a - b).abs().max()


@check
def compiled_flex_attention_trains_like_causal_sdpa() -> None:
    _flex_like_causal_sdpa(dynamic=False)


@check
def compiled_flex_attention_trains_like_causal_sdpa_dynamic() -> None:
    _flex_like_causal_sdpa(dynamic=True)


@check
def compiled_flex_attention_returns_its_log_sum_exp() -> None:
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.reset()
    torch.manual_seed(4)
    q, k, v = (torch.randn(1, 2, 128, 16, device="cuda") for _ in range(3))
    out, lse = torch.compile(flex_attention)(q, k, v, return_lse=True)
    want = torch.logsumexp(q @ k.transpose(-1, -2) / 4.0, -1)
    assert torch.allclose(lse, want, atol=1e-4), (lse - want).abs().max()
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-4)


@check
def varlen_attn_attends_within_each_sequence() -> None:
    """torch.nn.attention.varlen.varlen_attn (flash attention's variable-length operator on CUDA), forward
    and backward, against SDPA on each sequence."""
    from torch.nn.attention.varlen import varlen_attn

    torch.manual_seed(2)
    cu = torch.tensor([0, 5, 14], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(14, 2, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = varlen_attn(q, k, v, cu, cu, 9, 9)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    parts = [F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1) for t in leaves)).transpose(0, 1)
             for a, b in ((0, 5), (5, 14))]
    ref = torch.cat(parts)
    want = torch.autograd.grad(ref, leaves, g.float())
    assert out.shape == (14, 2, 16) and out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), ref, atol=2e-2), (out.float() - ref).abs().max()
    for a, b in zip(got, want):
        assert torch.allclose(a.float(), b, atol=5e-2), (a.float() - b).abs().max()


@check
def flash_attention_forward_outputs_as_cuda_returns_them() -> None:
    """_flash_attention_forward's outputs: shapes, dtypes and layouts of CUDA's (its meta function's), dense
    and variable-length; log-sum-exp in natural log."""
    torch.manual_seed(5)
    q = torch.randn(2, 6, 2, 16, device="cuda", dtype=torch.float16)
    k = torch.randn(2, 10, 2, 16, device="cuda", dtype=torch.float16)
    v = torch.randn(2, 10, 2, 16, device="cuda", dtype=torch.float16)
    out, lse, rng, unused, debug = torch.ops.aten._flash_attention_forward(q, k, v, None, None, 6, 10, 0.0, False, False)
    assert out.shape == q.shape and out.stride() == q.stride() and out.dtype == torch.float16
    assert lse.shape == (2, 2, 6) and lse.dtype == torch.float32 and lse.is_contiguous()
    assert rng.shape == (2,) and rng.dtype == torch.uint64 and unused.shape == () and debug.numel() == 0
    s = (q.float().transpose(1, 2) @ k.float().transpose(1, 2).transpose(-1, -2)) / 4.0
    assert torch.allclose(lse, torch.logsumexp(s, -1), atol=1e-3)
    cu = torch.tensor([0, 4, 12], dtype=torch.int32, device="cuda")
    qv = torch.randn(12, 2, 16, device="cuda", dtype=torch.bfloat16)
    out, lse = torch.ops.aten._flash_attention_forward(qv, qv, qv, cu, cu, 8, 8, 0.0, True, False)[:2]
    assert out.shape == (12, 2, 16) and lse.shape == (2, 12) and lse.dtype == torch.float32
