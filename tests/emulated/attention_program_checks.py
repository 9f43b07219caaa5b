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
