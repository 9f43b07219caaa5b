"""The replacements on a real NVIDIA GPU (L3 for the CUDA path): bf16 numerics against the float64 oracle.

Run on the H200 box (torch 2.11+cu130, no flash_attn):
    python3 -m pytest -q -m gpu tests/gpu/test_replacements_gpu.py
Tolerance: the flash kernel rounds the probabilities to bf16 before the PV product and the output
once more, so errors are a few bf16 ulps of O(1) values: atol = rtol = 2e-2 (LSE is float32: 1e-2).
Each test also asserts that the fast kernel was taken (no "portable per-sequence path" warning).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from replacements_ref import cu, make_paged, ref_attention  # noqa: E402

pytestmark = pytest.mark.gpu(torch=True)

DEV = "cuda"
BF16 = dict(rtol=2e-2, atol=2e-2)


@pytest.fixture(autouse=True)
def _nvidia(monkeypatch):
    from cudashim import _state

    monkeypatch.setenv("CUDASHIM_PLATFORM", "nvidia")
    _state.reset()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*portable per-sequence path.*")
        yield
    _state.reset()


def _rand(shape, gen):
    return torch.randn(*shape, generator=gen).to(torch.bfloat16)


def _paged_on_gpu(ks, vs, block, gen, capacity=None):
    p = make_paged(ks, vs, block, gen, capacity=capacity)
    return p.k_cache.to(DEV), p.v_cache.to(DEV), p.block_table.to(DEV)


@pytest.mark.parametrize("causal", [True, False])
def test_varlen_gqa_ragged(causal):
    from cudashim.replacements.flash_attn import flash_attn_varlen_func

    gen = torch.Generator().manual_seed(1)
    lq, lk = [1, 77, 512, 300], [1, 200, 512, 301]
    q = _rand((sum(lq), 32, 128), gen)
    k = _rand((sum(lk), 8, 128), gen)
    v = _rand((sum(lk), 8, 128), gen)
    out = flash_attn_varlen_func(q.to(DEV), k.to(DEV), v.to(DEV), cu(lq).to(DEV), cu(lk).to(DEV),
                                 max(lq), max(lk), causal=causal).cpu()
    cq, ck = cu(lq).tolist(), cu(lk).tolist()
    for b in range(4):
        ro, _ = ref_attention(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]],
                              scale=128 ** -0.5, causal=causal)
        torch.testing.assert_close(out[cq[b]:cq[b + 1]].double(), ro, **BF16)


def _count_calls(monkeypatch, module_getter, name):
    calls = []
    mod = module_getter()
    if mod is not None:
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    return mod, calls


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block", [16, 256])
def test_paged_prefill_prefix_cache(block, causal, monkeypatch):
    from cudashim.replacements import _attn_cuda
    from cudashim.replacements.flash_attn import flash_attn_varlen_func

    tri, calls = _count_calls(monkeypatch, _attn_cuda._triton_prefill, "paged_prefill")
    gen = torch.Generator().manual_seed(2)
    lq, lk = [44, 5, 18, 20], [300, 5, 530, 5]  # the last: more queries than keys (15 rows see nothing)
    q = _rand((sum(lq), 32, 128), gen)
    ks = [_rand((n, 8, 128), gen) for n in lk]
    vs = [_rand((n, 8, 128), gen) for n in lk]
    kc, vc, table = _paged_on_gpu(ks, vs, block, gen)
    fast = tri._prefill.fast_launches if tri is not None else 0

    def call():
        return flash_attn_varlen_func(q.to(DEV), kc, vc, max_seqlen_q=max(lq), cu_seqlens_q=cu(lq).to(DEV),
                                      max_seqlen_k=max(lk), cu_seqlens_k=cu(lk).to(DEV), softmax_scale=0.1,
                                      causal=causal, block_table=table).cpu()

    out = call()
    # the second call launches the compiled kernel without Triton's per-call binding
    # (replacements/_triton_launch.py): it must compute exactly what the JIT's launch did
    assert torch.equal(call(), out)
    if tri is not None:
        assert tri._prefill.fast_launches > fast
    cq = cu(lq).tolist()
    for b in range(len(lq)):
        ro, _ = ref_attention(q[cq[b]:cq[b + 1]], ks[b], vs[b], scale=0.1, causal=causal)
        torch.testing.assert_close(out[cq[b]:cq[b + 1]].double(), ro, **BF16)
    if tri is not None:
        assert calls  # read in place by the Triton kernel, not gathered


@pytest.mark.parametrize("block", [16, 256])
def test_paged_multi_query_kvcache_lse(block, monkeypatch):
    """Several new queries per sequence against a paged cache (speculative decoding): the paged
    flash-attention kernel, bottom-right causal, with its LSE."""
    from cudashim.replacements import _attn_cuda
    from cudashim.replacements.flash_attn import flash_attn_with_kvcache

    tri, calls = _count_calls(monkeypatch, _attn_cuda._triton_prefill, "paged_prefill")
    gen = torch.Generator().manual_seed(7)
    lens = [3, 400, 64]
    ks = [_rand((n, 8, 128), gen) for n in lens]
    vs = [_rand((n, 8, 128), gen) for n in lens]
    kc, vc, table = _paged_on_gpu(ks, vs, block, gen)
    q = _rand((3, 4, 32, 128), gen)
    out, lse = flash_attn_with_kvcache(q.to(DEV), kc, vc, cache_seqlens=torch.tensor(lens, dtype=torch.int32,
                                       device=DEV), block_table=table, causal=True, return_softmax_lse=True)
    out, lse = out.cpu(), lse.cpu()
    for b in range(3):
        ro, rl = ref_attention(q[b], ks[b], vs[b], scale=128 ** -0.5, causal=True)
        torch.testing.assert_close(out[b].double(), ro, **BF16)
        torch.testing.assert_close(lse[b].double(), rl, rtol=1e-2, atol=1e-2)
    if tri is not None:
        assert calls


@pytest.mark.parametrize("block", [16, 256])
def test_paged_decode_appends_in_place_and_returns_lse(block, monkeypatch):
    from cudashim.replacements import _attn_cuda
    from cudashim.replacements.flash_attn import flash_attn_with_kvcache

    tri = _attn_cuda._triton_decode()
    triton_calls = []
    if tri is not None:
        real = tri.paged_decode
        monkeypatch.setattr(tri, "paged_decode", lambda *a, **k: (triton_calls.append(1), real(*a, **k))[1])

    gen = torch.Generator().manual_seed(3)
    lens = [1, 700, 33, 256]
    ks = [_rand((n + 1, 8, 128), gen) for n in lens]
    vs = [_rand((n + 1, 8, 128), gen) for n in lens]
    kc, vc, table = _paged_on_gpu([kb[:-1] for kb in ks], [vb[:-1] for vb in vs], block, gen,
                                  capacity=[n + 1 for n in lens])
    q = _rand((4, 1, 32, 128), gen)
    k_new = torch.stack([kb[-1:] for kb in ks]).to(DEV)
    v_new = torch.stack([vb[-1:] for vb in vs]).to(DEV)
    out, lse = flash_attn_with_kvcache(q.to(DEV), kc, vc, k_new, v_new,
                                       cache_seqlens=torch.tensor(lens, dtype=torch.int32, device=DEV),
                                       block_table=table, causal=True, return_softmax_lse=True)
    out, lse = out.cpu(), lse.cpu()
    for b, n in enumerate(lens):
        page = int(table[b, n // block])
        assert torch.equal(kc[page, n % block].cpu(), ks[b][-1])
        ro, rl = ref_attention(q[b], ks[b], vs[b], scale=128 ** -0.5, causal=True)
        torch.testing.assert_close(out[b].double(), ro, **BF16)
        torch.testing.assert_close(lse[b].double(), rl, rtol=1e-2, atol=1e-2)
    if block == 16 and tri is not None:  # small pages: read in place by the Triton kernel, not gathered
        assert triton_calls


def test_dense_window_and_fa4_vision():
    from cudashim.replacements.flash_attn import flash_attn_func
    from cudashim.replacements.flash_attn_cute import _flash_attn_fwd

    gen = torch.Generator().manual_seed(4)
    q = _rand((2, 100, 16, 64), gen)
    k = _rand((2, 130, 4, 64), gen)
    v = _rand((2, 130, 4, 64), gen)
    out = flash_attn_func(q.to(DEV), k.to(DEV), v.to(DEV), causal=True, window_size=(32, 0)).cpu()
    for b in range(2):
        ro, _ = ref_attention(q[b], k[b], v[b], scale=0.125, causal=True, window=(32, 0))
        torch.testing.assert_close(out[b].double(), ro, **BF16)
    lens = [64, 16, 256]
    qv = _rand((sum(lens), 16, 64), gen)
    out, lse = _flash_attn_fwd(qv.to(DEV), qv.to(DEV), qv.to(DEV), cu_seqlens_q=[64, 80, 336])
    assert lse is None
    c = cu(lens).tolist()
    for b in range(3):
        s = slice(c[b], c[b + 1])
        ro, _ = ref_attention(qv[s], qv[s], qv[s], scale=0.125)
        torch.testing.assert_close(out.cpu()[s].double(), ro, **BF16)


def test_softcap_falls_back_with_one_warning_and_stays_correct():
    from cudashim.replacements.flash_attn import flash_attn_func

    gen = torch.Generator().manual_seed(5)
    q = _rand((1, 20, 4, 64), gen)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = flash_attn_func(q.to(DEV), q.to(DEV), q.to(DEV), causal=True, softcap=3.0).cpu()
    assert any("softcap" in str(x.message) for x in w)
    ro, _ = ref_attention(q[0], q[0], q[0], scale=0.125, causal=True, softcap=3.0)
    torch.testing.assert_close(out[0].double(), ro, **BF16)
    assert math.isfinite(float(out.float().sum()))


@pytest.mark.parametrize("block", [16, 256])
def test_paged_decode_captured_in_a_cuda_graph_replays_with_new_lengths_and_contents(block, monkeypatch):
    """nano-vllm's decode: flash_attn_with_kvcache captured once, replayed with other cache_seqlens, other
    cache contents and other q/k/v — every replay must equal the float64 oracle on the NEW data (a size
    or path taken from values at capture time, or a host sync, would break capture or the replays)."""
    from cudashim.replacements import _attn_cuda
    from cudashim.replacements.flash_attn import flash_attn_with_kvcache

    tri = _attn_cuda._triton_decode()
    triton_calls = []
    if tri is not None:
        real = tri.paged_decode
        monkeypatch.setattr(tri, "paged_decode", lambda *a, **k: (triton_calls.append(1), real(*a, **k))[1])
    gen = torch.Generator().manual_seed(6)
    batch, hq, hk, d, cap = 3, 32, 8, 128, 600
    width = -(-cap // block)
    num_pages = batch * width + 2
    kc = torch.zeros(num_pages, block, hk, d, dtype=torch.bfloat16, device=DEV)
    vc = torch.zeros_like(kc)
    table = torch.randperm(num_pages, generator=gen)[: batch * width].view(batch, width).to(torch.int32).to(DEV)
    q = torch.zeros(batch, 1, hq, d, dtype=torch.bfloat16, device=DEV)
    k_new = torch.zeros(batch, 1, hk, d, dtype=torch.bfloat16, device=DEV)
    v_new = torch.zeros_like(k_new)
    seqlens = torch.zeros(batch, dtype=torch.int32, device=DEV)

    def step():
        return flash_attn_with_kvcache(q, kc, vc, k_new, v_new, cache_seqlens=seqlens, block_table=table,
                                       causal=True, return_softmax_lse=True)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()

    for lens in ([5, 599, 0], [256, 17, 300]):
        ks = [_rand((n + 1, hk, d), gen) for n in lens]
        vs = [_rand((n + 1, hk, d), gen) for n in lens]
        kc.copy_(_rand(tuple(kc.shape), gen).to(DEV))  # garbage everywhere, then each sequence's tokens
        vc.copy_(_rand(tuple(vc.shape), gen).to(DEV))
        for b, n in enumerate(lens):
            pos = torch.arange(n, device=DEV)
            kc[table[b, pos // block].long(), pos % block] = ks[b][:n].to(DEV)
            vc[table[b, pos // block].long(), pos % block] = vs[b][:n].to(DEV)
        q.copy_(_rand(tuple(q.shape), gen).to(DEV))
        k_new.copy_(torch.stack([kb[-1:] for kb in ks]).to(DEV))
        v_new.copy_(torch.stack([vb[-1:] for vb in vs]).to(DEV))
        seqlens.copy_(torch.tensor(lens, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        got, got_lse = out.cpu(), lse.cpu()
        for b, n in enumerate(lens):
            assert torch.equal(kc[int(table[b, n // block]), n % block].cpu(), ks[b][-1])  # appended in place
            ro, rl = ref_attention(q[b].cpu(), ks[b], vs[b], scale=d ** -0.5, causal=True)
            torch.testing.assert_close(got[b].double(), ro, **BF16)
            torch.testing.assert_close(got_lse[b].double(), rl, rtol=1e-2, atol=1e-2)
    if tri is not None:
        assert triton_calls  # the Triton kernel is what the graph holds


@pytest.mark.parametrize("batch,cap,block,direct", [(1, 8192, 256, False), (5, 700, 16, False),
                                                   (80, 300, 16, True), (4, 16, 16, True)])
def test_decode_fast_launch_equals_the_jit_launch_bit_for_bit(batch, cap, block, direct):
    """The engines' decode call (no new k/v) is one launch: split-KV programs whose last finisher per
    (sequence, kv head) merges the splits, counted with atomics in a buffer it resets. And after the
    first launch of a key it skips Triton's per-call binding (replacements/_triton_launch.py). The first call
    goes through the JIT; the 19 later ones must launch the same compiled kernel with the same
    arguments and merge in the same order whichever program merges: bit-identical results (a race on
    the partials would show here), and the oracle's. The shapes cover split runs (small batch), one
    direct launch (batch 80: enough programs), and a block table one page wide (an int argument equal
    to 1, which Triton specializes on)."""
    from cudashim.replacements import _attn_cuda
    from cudashim.replacements.flash_attn import flash_attn_with_kvcache

    tri = _attn_cuda._triton_decode()
    assert tri is not None, "triton is installed on the GPU box"
    gen = torch.Generator().manual_seed(batch)
    hq, hk, d = 32, 8, 128
    lens = [cap if b == 0 else int(x) for b, x in enumerate(torch.randint(1, cap + 1, (batch,), generator=gen))]
    ks = [_rand((n, hk, d), gen) for n in lens]
    vs = [_rand((n, hk, d), gen) for n in lens]
    kc, vc, table = _paged_on_gpu(ks, vs, block, gen)
    q = _rand((batch, 1, hq, d), gen).to(DEV)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    splits = tri.num_splits(batch, hk, table.shape[1] * block, tri._num_sms(0))[0]
    assert (splits == 1) == direct, "the case covers the path it says"
    before = (tri._split.fast_launches, tri._combine.fast_launches)
    tri._split._compiled.clear()
    runs = [flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table, causal=True,
                                    return_softmax_lse=True) for _ in range(20)]
    torch.cuda.synchronize()
    assert tri._split.fast_launches - before[0] == 19  # every call after the first took the fast launch
    assert tri._combine.fast_launches == before[1]  # eager steps merge in the same launch
    assert all(int(c.abs().sum()) == 0 for c, _ in tri._workspaces.values())  # every count was reset
    (out0, lse0), *later = runs
    for out, lse in later:
        assert torch.equal(out, out0) and torch.equal(lse, lse0)
    assert out0.shape == (batch, 1, hq, d) and lse0.shape == (batch, hq, 1)
    plain = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table, causal=True)
    assert torch.equal(plain, out0)  # without the LSE (not written at all): the same output
    for b, n in enumerate(lens):
        ro, rl = ref_attention(q[b].cpu(), ks[b], vs[b], scale=d ** -0.5, causal=True)
        torch.testing.assert_close(out0[b].cpu().double(), ro, **BF16)
        torch.testing.assert_close(lse0[b].cpu().double(), rl, rtol=1e-2, atol=1e-2)
