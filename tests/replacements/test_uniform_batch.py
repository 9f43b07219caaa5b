"""The portable attention runs a batch of equal-length sequences as one SDPA call (a decode step of
a serve loop, a batch of equal prompts), with the per-sequence path's semantics: checked against the
float64 oracle, per sequence, including windows that leave rows with no key (output 0)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from cudashim.replacements.flash_attn import flash_attn_varlen_func

from replacements_ref import cu, randn, ref_attention, tolerance

CASES = [  # (batch, heads q/kv, seqlen q, seqlen k, causal, window)
    (8, (4, 2), 1, 70, True, (-1, -1)),   # decode step, GQA
    (3, (4, 4), 5, 5, True, (-1, -1)),    # equal prompts
    (4, (8, 2), 3, 9, False, (2, 0)),     # a window: some rows see no key
    (2, (4, 1), 6, 6, True, (1, -1)),     # MQA, sliding window
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch,heads,sq,sk,causal,window", CASES)
def test_equal_lengths_take_one_sdpa_call_with_the_oracles_answer(monkeypatch, batch, heads, sq, sk, causal, window, dtype):
    gen = torch.Generator().manual_seed(batch * 100 + sq)
    hq, hk = heads
    q = randn((batch * sq, hq, 32), dtype, gen)
    k = randn((batch * sk, hk, 32), dtype, gen)
    v = randn((batch * sk, hk, 32), dtype, gen)
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or sdpa(*a, **kw))
    out = flash_attn_varlen_func(q, k, v, cu([sq] * batch), cu([sk] * batch), sq, sk, causal=causal, window_size=window)
    assert len(calls) == 1  # one call for the batch, not one per sequence
    scale = 32 ** -0.5
    for b in range(batch):
        ref, _ = ref_attention(q[b * sq:(b + 1) * sq], k[b * sk:(b + 1) * sk], v[b * sk:(b + 1) * sk], scale=scale,
                               causal=causal, window=window)
        torch.testing.assert_close(out[b * sq:(b + 1) * sq].double(), ref.to(dtype).double(), **tolerance(dtype))


def test_unequal_lengths_still_go_one_sequence_at_a_time(monkeypatch):
    gen = torch.Generator().manual_seed(1)
    q, k, v = randn((3, 4, 32), torch.float32, gen), randn((12, 2, 32), torch.float32, gen), randn((12, 2, 32), torch.float32, gen)
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or sdpa(*a, **kw))
    out = flash_attn_varlen_func(q, k, v, cu([1, 1, 1]), cu([3, 4, 5]), 1, 5, causal=True)
    assert len(calls) == 3
    for b, (k0, k1) in enumerate([(0, 3), (3, 7), (7, 12)]):
        ref, _ = ref_attention(q[b:b + 1], k[k0:k1], v[k0:k1], scale=32 ** -0.5, causal=True)
        torch.testing.assert_close(out[b:b + 1].double(), ref, **tolerance(torch.float32))


def test_every_tensor_field_of_attn_is_viewed_on_a_host_memory_device() -> None:
    # _core views these on the emulated device; a new tensor field left out would reach CPU operators
    # as a device tensor
    import dataclasses

    from cudashim.replacements import _core
    from cudashim.replacements._attn import Attn

    tensor_fields = {f.name for f in dataclasses.fields(Attn) if "Tensor" in str(f.type)}
    assert set(_core._TENSOR_FIELDS) == tensor_fields and _core._TENSOR_FIELDS[0] == "q"
