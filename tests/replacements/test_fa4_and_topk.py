"""flash-attn 4 `_flash_attn_fwd` and deep_select `topk` replacements on the cpu path (L3)."""

from __future__ import annotations

import inspect
import sys
import types

import pytest
import torch

from cudashim import _state
from cudashim.replacements import deep_select
from cudashim.replacements.flash_attn_cute import _flash_attn_fwd

from replacements_ref import cu, randn, ref_attention


def test_fa4_signature_keeps_upstream_parameter_order():
    names = list(inspect.signature(_flash_attn_fwd).parameters)
    assert names[:12] == ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k",
                          "max_seqlen_q", "max_seqlen_k", "page_table", "softmax_scale", "causal"]
    assert "return_lse" in names and "out" in names


@pytest.mark.parametrize("as_list", [True, False])
def test_fa4_vision_varlen_is_full_attention_per_image(as_list):
    gen = torch.Generator().manual_seed(41)
    lens = [9, 1, 25]
    q, k, v = (randn((sum(lens), 4, 64), torch.bfloat16, gen) for _ in range(3))
    cu_arg = [9, 10, 35] if as_list else cu(lens)
    out, lse = _flash_attn_fwd(q, k, v, cu_seqlens_q=cu_arg)
    assert lse is None and out.shape == q.shape
    starts = cu(lens).tolist()
    for i in range(3):
        s = slice(starts[i], starts[i + 1])
        ro, _ = ref_attention(q[s], k[s], v[s], scale=0.125)
        torch.testing.assert_close(out[s].double(), ro, rtol=torch.finfo(torch.bfloat16).eps, atol=1e-5)


def test_fa4_batched_causal_with_lse_and_out_buffer():
    gen = torch.Generator().manual_seed(42)
    q = randn((2, 5, 4, 64), torch.float32, gen)
    k = randn((2, 8, 2, 64), torch.float32, gen)
    v = randn((2, 8, 2, 64), torch.float32, gen)
    buf = torch.empty_like(q)
    out, lse = _flash_attn_fwd(q, k, v, causal=True, return_lse=True, out=buf)
    assert out is buf and lse.shape == (2, 4, 5)
    for b in range(2):
        ro, rl = ref_attention(q[b], k[b], v[b], scale=0.125, causal=True)
        torch.testing.assert_close(out[b].double(), ro, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse[b].double(), rl, rtol=1e-5, atol=1e-5)


def test_topk_sampler_path_honours_indices_type():
    x = torch.tensor([[0.1, 3.0, -1.0, 2.0], [5.0, 4.0, 3.0, 2.0]])
    values, idx = deep_select.topk(x, 2, sorted=True, indices_type=torch.int32)
    assert idx.dtype == torch.int32
    assert idx.tolist() == [[1, 3], [0, 1]] and values.tolist() == [[3.0, 2.0], [5.0, 4.0]]
    values, idx = deep_select.topk(x, 2, return_value=True)
    assert idx.dtype == torch.int64 and values is not None


def test_topk_indexer_path_pads_with_minus_one_without_the_kernel(monkeypatch):
    monkeypatch.setattr(deep_select, "_real", None)
    x = torch.tensor([[0.5, 2.0, 1.0]])
    values, idx = deep_select.topk(x, 5, sorted=True, indices_type=torch.int32, return_value=False)
    assert values is None
    assert idx.tolist() == [[1, 2, 0, -1, -1]] and idx.dtype == torch.int32


def test_topk_indexer_path_uses_the_real_kernel_when_installed(monkeypatch):
    calls = []

    def real_topk(*args, **kwargs):
        calls.append((args, kwargs))
        return None, torch.tensor([[7]])

    pkg = types.ModuleType("deep_select")
    iface = types.ModuleType("deep_select.interface")
    iface.topk = real_topk
    pkg.interface = iface
    monkeypatch.setitem(sys.modules, "deep_select", pkg)
    monkeypatch.setitem(sys.modules, "deep_select.interface", iface)
    _state.reset()  # forget any earlier lookup
    x = torch.zeros(1, 4)
    assert deep_select.topk(x, 1, return_value=False)[1].tolist() == [[7]]
    assert calls == [((x, 1), {"return_value": False})]
    # the sampler never goes to the kernel
    deep_select.topk(x, 1)
    assert len(calls) == 1
