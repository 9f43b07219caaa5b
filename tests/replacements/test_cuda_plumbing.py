"""The CUDA path's plumbing into PyTorch's flash kernel, checked on CPU against an emulation.

`_attn_cuda` hands packed tensors, cu_seqlens, seqused_k, windows and (for pages of 256) the block
table to `aten._flash_attention_forward`. Here that op is replaced by an emulation of flash-attn's
documented varlen semantics over the float64 oracle (including its rules: one query drops causal,
paged blocks must be multiples of 256), so a wrong offset, length or window shows as a wrong number.
The real kernel's numerics are checked on an H200 by tests/gpu/test_replacements_gpu.py.
"""

from __future__ import annotations

import pytest
import torch

from cudashim.replacements import _attn_cuda
from cudashim.replacements._attn import Attn, normalize_window
from cudashim.replacements.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache

from replacements_ref import cu, make_paged, randn, ref_attention

SCHEMA = frozenset({"query", "key", "value", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p",
                    "is_causal", "return_debug_mask", "scale", "window_size_left", "window_size_right",
                    "seqused_k", "alibi_slopes", "block_table", "num_splits"})


class FlashEmulation:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                 return_debug_mask, *, scale=None, window_size_left=None, window_size_right=None,
                 seqused_k=None, alibi_slopes=None, block_table=None, num_splits=None):
        self.calls.append({"key_shape": tuple(key.shape), "block_table": block_table, "seqused_k": seqused_k,
                           "max_k": max_k, "is_causal": is_causal, "window": (window_size_left, window_size_right)})
        assert cum_seq_q.dtype == torch.int32 and cum_seq_k is not None and cum_seq_k.dtype == torch.int32
        if max_q == 1 and alibi_slopes is None:
            is_causal = False  # flash-attn: causal is a no-op for a single query
        left = -1 if window_size_left is None else window_size_left
        right = -1 if window_size_right is None else window_size_right
        if is_causal:
            right = 0
        cq = cum_seq_q.tolist()
        ck = cum_seq_k.tolist()
        outs, lses = [], []
        for b in range(len(cq) - 1):
            n = int(seqused_k[b]) if seqused_k is not None else ck[b + 1] - ck[b]
            if block_table is not None:
                bs = key.shape[1]
                assert bs % 256 == 0, "flash-attn 2: paged KV block size must be divisible by 256"
                pages = block_table[b, : -(-n // bs)].long()
                kb, vb = key[pages].flatten(0, 1)[:n], value[pages].flatten(0, 1)[:n]
            else:
                kb, vb = key[ck[b]:ck[b] + n], value[ck[b]:ck[b] + n]
            causal = left < 0 and right == 0
            window = (-1, -1) if causal else (left, right)
            o, l = ref_attention(query[cq[b]:cq[b + 1]], kb, vb, scale=scale, causal=causal, window=window)
            outs.append(o)
            lses.append(l)
        out = torch.cat(outs).to(query.dtype)
        return out, torch.cat(lses, dim=1).float(), None, None, None


@pytest.fixture
def flash(monkeypatch):
    emu = FlashEmulation()
    monkeypatch.setattr(_attn_cuda, "_op", lambda: emu)
    monkeypatch.setattr(_attn_cuda, "_schema_args", lambda: SCHEMA)
    # _triton_decode is left alone: where triton is installed (CI installs it, nano-vllm needs it) the
    # code itself must see that these CPU tensors cannot run a Triton kernel and gather instead
    return emu


@pytest.mark.parametrize("block", [16, 256])
def test_paged_prefill_native_for_256_and_gathered_otherwise(flash, block):
    gen = torch.Generator().manual_seed(51)
    lq, lk = [4, 1, 30], [300, 1, 30]
    q = randn((sum(lq), 8, 64), torch.bfloat16, gen)
    ks = [randn((n, 2, 64), torch.bfloat16, gen) for n in lk]
    vs = [randn((n, 2, 64), torch.bfloat16, gen) for n in lk]
    p = make_paged(ks, vs, block, gen)
    a = Attn(api="t", q=q, k=p.k_cache, v=p.v_cache, cu_q=cu(lq), max_q=30, max_k=300, cu_k=cu(lk),
             seqused_k=cu(lk)[1:] - cu(lk)[:-1], block_table=p.block_table, scale=0.125, causal=True,
             window=normalize_window(None, True))
    assert _attn_cuda.why_not(a) == "tensors are not all on one CUDA device"  # the only objection on CPU
    out, _, _ = _attn_cuda.attend(a)
    call, = flash.calls
    if block == 256:
        assert call["block_table"] is not None and call["key_shape"] == tuple(p.k_cache.shape)
    else:
        assert call["block_table"] is None and call["key_shape"][0] == 3 * 19 * 16  # padded gather, one buffer
    assert call["window"] == (None, None) and call["is_causal"] is True
    cq = cu(lq).tolist()
    for b in range(3):
        ro, _ = ref_attention(q[cq[b]:cq[b + 1]], ks[b], vs[b], scale=0.125, causal=True)
        torch.testing.assert_close(out[cq[b]:cq[b + 1]].double(), ro, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("block", [16, 256])
def test_decode_through_the_public_api_on_cuda_plumbing(flash, monkeypatch, block):
    import cudashim.replacements.flash_attn as fa
    from cudashim.replacements import _core

    def attend_as_cuda(a):  # route as _core.attend does for CUDA tensors (the emulation runs on CPU)
        _core.check(a)
        return _attn_cuda.attend(a)

    monkeypatch.setattr(fa, "attend", attend_as_cuda)
    gen = torch.Generator().manual_seed(52)
    lens = [7, 300, 1]
    ks = [randn((n + 1, 2, 64), torch.bfloat16, gen) for n in lens]
    vs = [randn((n + 1, 2, 64), torch.bfloat16, gen) for n in lens]
    p = make_paged([kb[:-1] for kb in ks], [vb[:-1] for vb in vs], block, gen, capacity=[n + 1 for n in lens])
    q = randn((3, 1, 8, 64), torch.bfloat16, gen)
    k_new = torch.stack([kb[-1:] for kb in ks])
    v_new = torch.stack([vb[-1:] for vb in vs])
    out = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, k_new, v_new, cache_seqlens=torch.tensor(lens),
                                  block_table=p.block_table, causal=True)
    call, = flash.calls  # the flash kernel ran: no Triton launch on CPU tensors, triton installed or not
    assert call["seqused_k"].tolist() == [n + 1 for n in lens]
    if block == 16:
        assert call["block_table"] is None and call["key_shape"][0] == 3 * p.block_table.shape[1] * 16
    for b in range(3):
        ro, _ = ref_attention(q[b], ks[b], vs[b], scale=0.125, causal=True)
        torch.testing.assert_close(out[b].double(), ro, rtol=1e-2, atol=1e-2)


def test_windows_go_down_as_windows_and_fallback_reasons_are_named(flash):
    gen = torch.Generator().manual_seed(53)
    q, k, v = (randn((20, 2, 64), torch.float16, gen) for _ in range(3))
    a = Attn(api="t", q=q, k=k, v=v, cu_q=cu([20]), max_q=20, max_k=20, cu_k=cu([20]), scale=0.125,
             causal=True, window=normalize_window((5, -1), True))
    out, _, _ = _attn_cuda.attend(a)
    assert flash.calls[0]["window"] == (5, 0)
    ro, _ = ref_attention(q, k, v, scale=0.125, causal=True, window=(5, 0))
    torch.testing.assert_close(out.double(), ro, rtol=1e-2, atol=1e-2)
    assert "dtype" in _attn_cuda.why_not(Attn(api="t", q=q.float(), k=k.float(), v=v.float(), cu_q=cu([20]),
                                               max_q=20, max_k=20, cu_k=cu([20]), scale=0.1))
    assert "softcap" in _attn_cuda.why_not(Attn(api="t", q=q, k=k, v=v, cu_q=cu([20]), max_q=20, max_k=20,
                                                 cu_k=cu([20]), scale=0.1, softcap=5.0))


def test_small_page_decode_goes_to_the_triton_kernel_on_a_gpu(flash, monkeypatch):
    import types

    import cudashim.replacements.flash_attn as fa
    from cudashim.replacements import _core
    from cudashim.replacements._paged_decode_triton import supports

    seen = {}

    def paged_decode(q, k_cache, v_cache, block_table, seqlens, scale, max_len, want_lse):
        seen.update(q=q.shape, k=k_cache.shape, table=block_table, lens=seqlens.tolist(), max_len=max_len,
                    want_lse=want_lse)
        return q.clone(), torch.zeros(q.shape[0], q.shape[1]) if want_lse else None

    monkeypatch.setattr(_attn_cuda, "_triton_decode", lambda: types.SimpleNamespace(
        supports=supports, paged_decode=paged_decode))
    monkeypatch.setattr(_attn_cuda, "_triton_can_run", lambda t: True)  # as if these tensors were on a GPU
    monkeypatch.setattr(fa, "attend", lambda a: (_core.check(a), _attn_cuda.attend(a))[1])
    gen = torch.Generator().manual_seed(54)
    p = make_paged([randn((n, 2, 64), torch.float16, gen) for n in (9, 40)],
                   [randn((n, 2, 64), torch.float16, gen) for n in (9, 40)], 16, gen)
    q = randn((2, 1, 8, 64), torch.float16, gen)
    out, lse = flash_attn_with_kvcache(q, p.k_cache, p.v_cache, cache_seqlens=torch.tensor([9, 40]),
                                       block_table=p.block_table, causal=True, return_softmax_lse=True)
    assert flash.calls == []  # the flash kernel was not used
    assert seen["q"] == (2, 8, 64) and seen["k"] == tuple(p.k_cache.shape) and seen["lens"] == [9, 40]
    assert seen["max_len"] == p.block_table.shape[1] * 16 and seen["want_lse"] is True
    assert torch.equal(out[:, 0], q[:, 0]) and lse.shape == (2, 8, 1)
    # the engines' fast decode call declines what the general path must reject with its message
    for bad in (float("nan"), float("inf"), 0.0):
        assert _attn_cuda.fast_decode(q, p.k_cache, p.v_cache, p.block_table, torch.tensor([9, 40]), bad, False) is None
    assert _attn_cuda.fast_decode(q, p.k_cache, p.v_cache, p.block_table, torch.tensor([9, 40]), 0.1, False) is not None


def test_paged_prefill_goes_to_the_triton_kernel_on_a_gpu_unless_it_cannot_honour_the_call(flash, monkeypatch):
    import types

    from cudashim.replacements._paged_prefill_triton import supports

    seen = []

    def paged_prefill(q, k_cache, v_cache, block_table, cu_q, seqlens_k, max_q, scale, causal):
        seen.append(dict(cu_q=cu_q, lens=seqlens_k, table=block_table, max_q=max_q, scale=scale, causal=causal))
        return torch.zeros_like(q), torch.zeros(q.shape[1], q.shape[0])

    monkeypatch.setattr(_attn_cuda, "_triton_prefill", lambda: types.SimpleNamespace(
        supports=supports, paged_prefill=paged_prefill))
    monkeypatch.setattr(_attn_cuda, "_triton_can_run", lambda t: True)  # as if these tensors were on a GPU
    import cudashim.replacements.flash_attn as fa
    from cudashim.replacements import _core

    monkeypatch.setattr(fa, "attend", lambda a: (_core.check(a), _attn_cuda.attend(a))[1])
    gen = torch.Generator().manual_seed(55)
    lq, lk = [4, 1, 30], [300, 1, 30]
    q = randn((sum(lq), 8, 64), torch.bfloat16, gen)
    p = make_paged([randn((n, 2, 64), torch.bfloat16, gen) for n in lk],
                   [randn((n, 2, 64), torch.bfloat16, gen) for n in lk], 16, gen)
    cu_q64, cu_k64 = cu(lq).long(), cu(lk).long()  # as a caller might pass them: int64
    flash_attn_varlen_func(q, p.k_cache, p.v_cache, cu_q64, cu_k64, 30, 300, softmax_scale=0.3, causal=True,
                           block_table=p.block_table)
    call, = seen
    assert flash.calls == []
    assert call["cu_q"].dtype == torch.int32 and call["cu_q"].tolist() == cu(lq).tolist()
    keys = call["lens"]  # (B,) lengths or, as here, cu_seqlens_k itself (the kernel takes differences)
    assert keys.dtype == torch.int32 and keys.tolist() == cu(lk).tolist()
    assert call["max_q"] == 30 and call["scale"] == 0.3 and call["causal"] is True
    assert call["table"].dtype == torch.int32

    # a sliding window and ALiBi are not in that kernel: they stay with the flash kernel (gathered pages)
    flash_attn_varlen_func(q, p.k_cache, p.v_cache, cu_q64, cu_k64, 30, 300, causal=True, window_size=(8, 0),
                           block_table=p.block_table)
    flash_attn_varlen_func(q, p.k_cache, p.v_cache, cu_q64, cu_k64, 30, 300, causal=True,
                           alibi_slopes=torch.ones(8), block_table=p.block_table)
    assert len(seen) == 1 and len(flash.calls) == 2 and flash.calls[0]["window"] == (8, 0)


def test_fast_prefill_path_computes_what_the_general_path_does_and_declines_the_rest(flash, monkeypatch):
    """fast_varlen (the engines' prefill, served without building an Attn) hands the flash kernel the
    same packed call as the general path (same numbers), sends a paged cache to the Triton prefill with
    cu_seqlens_k as the key lengths, and declines (None) what it does not serve exactly, so the
    general path runs and gives its precise errors."""
    import types

    from cudashim.replacements._paged_prefill_triton import supports

    gen = torch.Generator().manual_seed(56)
    lq, lk = [5, 1, 30], [40, 1, 30]
    q = randn((sum(lq), 8, 64), torch.bfloat16, gen)
    k = randn((sum(lk), 2, 64), torch.bfloat16, gen)
    v = randn((sum(lk), 2, 64), torch.bfloat16, gen)
    out = _attn_cuda.fast_varlen(q, k, v, cu(lq).long(), cu(lk), 30, 40, 0.2, True, None)
    general, _, _ = _attn_cuda.attend(Attn(api="t", q=q, k=k, v=v, cu_q=cu(lq), max_q=30, max_k=40, cu_k=cu(lk),
                                           scale=0.2, causal=True, window=(-1, 0)))
    assert torch.equal(out, general) and len(flash.calls) == 2
    assert flash.calls[0] == flash.calls[1]  # the same kernel call
    cq, ck = cu(lq).tolist(), cu(lk).tolist()
    for b in range(len(lq)):
        ro, _ = ref_attention(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], scale=0.2, causal=True)
        torch.testing.assert_close(out[cq[b]:cq[b + 1]].double(), ro, rtol=2e-2, atol=2e-2)
    # declined: fp32, mixed dtypes, head dims the kernel lacks, GQA that does not divide, a bad scale
    assert _attn_cuda.fast_varlen(q.float(), k.float(), v.float(), cu(lq), cu(lk), 30, 40, 0.2, True, None) is None
    assert _attn_cuda.fast_varlen(q, k.half(), v, cu(lq), cu(lk), 30, 40, 0.2, True, None) is None
    assert _attn_cuda.fast_varlen(q[..., :60], k[..., :60], v[..., :60], cu(lq), cu(lk), 30, 40, 0.2, True,
                                  None) is None
    assert _attn_cuda.fast_varlen(q[:, :7], k, v, cu(lq), cu(lk), 30, 40, 0.2, True, None) is None
    assert _attn_cuda.fast_varlen(q, k, v, cu(lq), cu(lk), 30, 40, float("nan"), True, None) is None

    seen = []

    def paged_prefill(q, k_cache, v_cache, block_table, cu_q, seqlens_k, max_q, scale, causal):
        seen.append(dict(lens=seqlens_k, table=block_table, max_q=max_q, scale=scale, causal=causal))
        return torch.zeros_like(q), torch.zeros(q.shape[1], q.shape[0])

    monkeypatch.setattr(_attn_cuda, "_triton_prefill", lambda: types.SimpleNamespace(
        supports=supports, paged_prefill=paged_prefill))
    monkeypatch.setattr(_attn_cuda, "_triton_can_run", lambda t: True)  # as if these tensors were on a GPU
    p = make_paged([k[ck[b]:ck[b + 1]] for b in range(3)], [v[ck[b]:ck[b + 1]] for b in range(3)], 16, gen)
    _attn_cuda.fast_varlen(q, p.k_cache, p.v_cache, cu(lq), cu(lk).long(), 30, 40, 0.2, False, p.block_table)
    call, = seen
    assert call["lens"].dtype == torch.int32 and call["lens"].tolist() == cu(lk).tolist()
    assert call["max_q"] == 30 and call["scale"] == 0.2 and call["causal"] is False
    assert _attn_cuda.fast_varlen(q, p.k_cache, p.v_cache, cu(lq), None, 30, 40, 0.2, True, p.block_table) is None
