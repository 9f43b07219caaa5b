"""The simulated NPU operators against their documented conventions, with an oracle written here.

`naive` is float64 attention over an explicit keep(i, j) predicate written from the docs' words
(torch-npu 2.13.0 `_op_plugin_docs.py`): it shares no code with cudashim.emulated.npu. Each layout and
sparse_mode the simulator implements is run once through the operator and compared; the argument
conventions (cumulative vs per-batch lengths, paged caches, output tuples) are checked by building the
inputs the documented way and comparing numbers, so a misread convention gives a wrong number.
"""

from __future__ import annotations

import math

import pytest
import torch

from cudashim.errors import CapabilityError, CudashimError
from cudashim.emulated.npu.ops import NpuOperatorError, npu_fused_infer_attention_score as fia
from cudashim.emulated.npu.ops import npu_fusion_attention as fa

INT_MAX = 2147483647
COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)  # the docs' optimised mask


def naive(q, k, v, scale, keep=lambda i, j: True):
    """q (Sq, Nq, D), k/v (Skv, Nkv, D): float64 out (Sq, Nq, Dv), lse (Nq, Sq); query head h uses KV head
    h // (Nq // Nkv). Rows with no kept key give out 0."""
    sq, nq, _ = q.shape
    skv, nkv, _ = k.shape
    out = torch.zeros(sq, nq, v.shape[-1], dtype=torch.float64)
    lse = torch.full((nq, sq), -math.inf, dtype=torch.float64)
    for h in range(nq):
        kh, vh = k[:, h // (nq // nkv)].double(), v[:, h // (nq // nkv)].double()
        for i in range(sq):
            cols = [j for j in range(skv) if keep(i, j)]
            if not cols:
                continue
            s = (kh[cols] @ q[i, h].double()) * scale
            p = torch.softmax(s, dim=0)
            out[i, h] = p @ vh[cols]
            lse[h, i] = torch.logsumexp(s, dim=0)
    return out, lse


def rnd(shape, dtype=torch.float16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def close(actual, expected, dtype=torch.float16):
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(actual.double(), expected, rtol=eps, atol=1e-4)


# ---------------------------------------------------------------- npu_fusion_attention: layouts


@pytest.mark.parametrize("layout", ["BSND", "BNSD", "BSH", "SBH"])
def test_fusion_attention_layouts_with_gqa_and_scale(layout):
    b, sq, skv, n, nkv, d = 2, 5, 7, 4, 2, 32
    q, k, v = rnd((b, sq, n, d), seed=1), rnd((b, skv, nkv, d), seed=2), rnd((b, skv, nkv, d), seed=3)
    to = {"BSND": lambda t: t, "BNSD": lambda t: t.transpose(1, 2).contiguous(),
          "BSH": lambda t: t.reshape(t.shape[0], t.shape[1], -1),
          "SBH": lambda t: t.reshape(t.shape[0], t.shape[1], -1).transpose(0, 1).contiguous()}[layout]
    res = fa(to(q), to(k), to(v), n, layout, scale=0.3)
    assert len(res) == 7 and res[4:] == (0, 0, 0)
    out = res[0]
    assert out.shape == to(q).shape and out.dtype == torch.float16
    want = torch.stack([naive(q[i], k[i], v[i], 0.3)[0] for i in range(b)])
    close(out, to(want))
    assert res[1].shape == res[2].shape == (b, n, sq, 8) and res[1].dtype == torch.float32  # meta shapes


def test_fusion_attention_softmax_max_and_sum_are_the_row_statistics():
    q, k, v = rnd((1, 3, 2, 16), seed=4), rnd((1, 6, 2, 16), seed=5), rnd((1, 6, 2, 16), seed=6)
    _, smax, ssum, *_ = fa(q, k, v, 2, "BSND", scale=0.5)
    s = torch.einsum("qhd,khd->hqk", q[0].double(), k[0].double()) * 0.5
    m = s.amax(-1)
    torch.testing.assert_close(smax[0, :, :, 3].double(), m, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(ssum[0, :, :, 0].double(), torch.exp(s - m.unsqueeze(-1)).sum(-1), rtol=1e-3, atol=1e-3)


def test_fusion_attention_tnd_takes_cumulative_ends_with_zero_lengths_and_left_out_tails():
    n, d = 2, 16
    lq, lk = [2, 0, 3, 4], [3, 2, 3, 5]  # the last batch is left out by trailing zeros below
    q, k, v = rnd((9, n, d), seed=7), rnd((13, n, d), seed=8), rnd((13, n, d), seed=9)
    out = fa(q, k, v, n, "TND", scale=0.25, actual_seq_qlen=[2, 2, 5, 0], actual_seq_kvlen=[3, 5, 8, 0])[0]
    assert out.shape == (9, n, d)
    qa, ka = [0, 2, 2], [0, 3, 5]
    for i in range(3):
        ref = naive(q[qa[i]:qa[i] + lq[i]], k[ka[i]:ka[i] + lk[i]], v[ka[i]:ka[i] + lk[i]], 0.25)[0]
        close(out[qa[i]:qa[i] + lq[i]], ref)
    assert torch.count_nonzero(out[5:]) == 0  # rows of the left-out batch are not computed


def test_fusion_attention_tnd_refuses_per_sequence_lengths():
    q = rnd((5, 2, 16))
    with pytest.raises(NpuOperatorError, match="cumulative"):
        fa(q, q, q, 2, "TND", actual_seq_qlen=[3, 2], actual_seq_kvlen=[3, 5])


# ---------------------------------------------------------------- npu_fusion_attention: sparse_mode


def _fa_mode(mode, sq, skv, mask=None, pre=INT_MAX, nxt=INT_MAX):
    q, k, v = rnd((1, sq, 2, 16), seed=10), rnd((1, skv, 2, 16), seed=11), rnd((1, skv, 2, 16), seed=12)
    out = fa(q, k, v, 2, "BSND", atten_mask=mask, scale=0.25, sparse_mode=mode, pre_tockens=pre, next_tockens=nxt)[0]
    return out[0], (q[0], k[0], v[0])


@pytest.mark.parametrize("sq,skv", [(4, 9), (6, 6)])
def test_sparse_mode_3_is_bottom_right_causal(sq, skv):
    out, (q, k, v) = _fa_mode(3, sq, skv, COMPRESSED)
    close(out, naive(q, k, v, 0.25, lambda i, j: j <= i + skv - sq)[0])


def test_sparse_mode_2_is_top_left_causal():
    out, (q, k, v) = _fa_mode(2, 4, 9, COMPRESSED)
    close(out, naive(q, k, v, 0.25, lambda i, j: j <= i)[0])


@pytest.mark.parametrize("pre,nxt", [(2, 0), (1, 2), (INT_MAX, 1), (6, -2)])  # docs: next may be negative
def test_sparse_mode_4_is_a_band_counted_from_the_bottom_right(pre, nxt):
    sq, skv = 4, 9
    out, (q, k, v) = _fa_mode(4, sq, skv, COMPRESSED, pre, nxt)
    close(out, naive(q, k, v, 0.25, lambda i, j: i + skv - sq - pre <= j <= i + skv - sq + nxt)[0])


def test_sparse_mode_0_applies_the_full_mask_the_docs_example_builds():
    sq = skv = 8
    pre, nxt = 2, 1  # the docs' reference: triu(k=next+1) + tril(k=-pre-1) is masked
    mask = (torch.triu(torch.ones(sq, skv), nxt + 1) + torch.tril(torch.ones(sq, skv), -pre - 1)).bool()
    out, (q, k, v) = _fa_mode(0, sq, skv, mask, pre, nxt)
    close(out, naive(q, k, v, 0.25, lambda i, j: not bool(mask[i, j]))[0])


def test_sparse_mode_1_applies_an_arbitrary_mask_and_ignores_pre_next():
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(3)) > 0.6
    mask[:, 0] = False
    out, (q, k, v) = _fa_mode(1, 5, 7, mask, pre=0, nxt=0)
    close(out, naive(q, k, v, 0.25, lambda i, j: not bool(mask[i, j]))[0])


def test_no_mask_means_full_attention_whatever_the_sparse_mode():
    out, (q, k, v) = _fa_mode(3, 4, 9, None)  # docs: atten_mask None -> sparse_mode/pre/next have no effect
    close(out, naive(q, k, v, 0.25)[0])


def test_sparse_mode_3_in_tnd_is_per_sequence_bottom_right():
    q, k, v = rnd((7, 2, 16), seed=13), rnd((12, 2, 16), seed=14), rnd((12, 2, 16), seed=15)
    out = fa(q, k, v, 2, "TND", atten_mask=COMPRESSED, scale=0.25, sparse_mode=3,
             actual_seq_qlen=[3, 7], actual_seq_kvlen=[8, 12])[0]
    close(out[:3], naive(q[:3], k[:8], v[:8], 0.25, lambda i, j: j <= i + 5)[0])
    close(out[3:], naive(q[3:], k[8:], v[8:], 0.25, lambda i, j: j <= i)[0])


def test_a_wrong_compressed_mask_and_unsimulated_modes_raise():
    q = rnd((1, 4, 2, 16))
    with pytest.raises(NpuOperatorError, match="atten_mask"):
        fa(q, q, q, 2, "BSND", atten_mask=torch.ones(4, 4, dtype=torch.bool), sparse_mode=3)
    with pytest.raises(CapabilityError, match="sparse_mode=5"):
        fa(q, q, q, 2, "BSND", sparse_mode=5)
    with pytest.raises(CapabilityError, match="pse"):
        fa(q, q, q, 2, "BSND", pse=torch.zeros(1))
    assert issubclass(NpuOperatorError, CudashimError)


# ---------------------------------------------------------------- npu_fused_infer_attention_score


@pytest.mark.parametrize("layout", ["BSND", "BNSD", "BSH", "BNSD_BSND"])
def test_fused_infer_layouts_per_batch_lengths_and_lse(layout):
    b, sq, skv, n, nkv, d = 3, 4, 10, 4, 2, 32
    q, k, v = rnd((b, sq, n, d), torch.bfloat16, 16), rnd((b, skv, nkv, d), torch.bfloat16, 17), \
        rnd((b, skv, nkv, d), torch.bfloat16, 18)
    to = {"BSND": lambda t: t, "BNSD": lambda t: t.transpose(1, 2).contiguous(),
          "BNSD_BSND": lambda t: t.transpose(1, 2).contiguous(),
          "BSH": lambda t: t.reshape(t.shape[0], t.shape[1], -1)}[layout]
    qlen, kvlen = [4, 2, 3], [10, 5, 8]  # per-batch (not cumulative) outside TND
    out, lse = fia(to(q), to(k), to(v), num_heads=n, num_key_value_heads=nkv, scale=0.2, input_layout=layout,
                   actual_seq_lengths=qlen, actual_seq_lengths_kv=kvlen, softmax_lse_flag=True)
    assert lse.shape == (b, n, sq, 1) and lse.dtype == torch.float32
    back = {"BSND": lambda t: t, "BNSD": lambda t: t.transpose(1, 2), "BNSD_BSND": lambda t: t,
            "BSH": lambda t: t.reshape(b, sq, n, d)}[layout]
    out = back(out)
    for i in range(b):
        ro, rl = naive(q[i, :qlen[i]], k[i, :kvlen[i]], v[i, :kvlen[i]], 0.2)
        close(out[i, :qlen[i]], ro, torch.bfloat16)
        torch.testing.assert_close(lse[i, :, :qlen[i], 0].double(), rl, rtol=1e-5, atol=1e-5)


def test_fused_infer_single_length_is_broadcast_and_lse_off_is_one_zero():
    q, k = rnd((2, 1, 2, 16), seed=19), rnd((2, 6, 2, 16), seed=20)
    out, lse = fia(q, k, k, num_heads=2, input_layout="BSND", actual_seq_lengths_kv=[4])
    for i in range(2):
        close(out[i], naive(q[i], k[i, :4], k[i, :4], 1.0)[0])  # scale defaults to 1.0
    assert lse.shape == (1,) and float(lse) == 0.0


@pytest.mark.parametrize("cache", ["blocknum_blocksize_H", "blocknum_N_blocksize_D"])
@pytest.mark.parametrize("qs,block", [(1, 16), (3, 128)])
def test_fused_infer_page_attention_reads_pages_through_the_block_table(cache, qs, block):
    n, nkv, d = 4, 2, 16
    lens = [5, block + 3]
    keys = [rnd((L, nkv, d), seed=30 + i) for i, L in enumerate(lens)]
    vals = [rnd((L, nkv, d), seed=40 + i) for i, L in enumerate(lens)]
    table = torch.tensor([[3, -1], [0, 2]], dtype=torch.int32)  # pages 3 | 0, 2; page 1 unused
    kc = torch.full((4, block, nkv, d), 7.0, dtype=torch.float16)
    vc = kc.clone()
    for b, L in enumerate(lens):
        for t in range(L):
            kc[int(table[b, t // block]), t % block] = keys[b][t]
            vc[int(table[b, t // block]), t % block] = vals[b][t]
    q = rnd((2, qs, n, d), seed=50)
    if cache == "blocknum_blocksize_H":
        kk, vv, layout, qq = kc.reshape(4, block, nkv * d), vc.reshape(4, block, nkv * d), "BSND", q
    else:
        kk, vv, layout, qq = kc.transpose(1, 2), vc.transpose(1, 2), "BNSD", q.transpose(1, 2)
    mask = dict(atten_mask=COMPRESSED, sparse_mode=3) if qs > 1 else {}
    out = fia(qq, kk, vv, num_heads=n, num_key_value_heads=nkv, scale=0.25, input_layout=layout,
              block_table=table, block_size=block, actual_seq_lengths_kv=lens, **mask)[0]
    out = out if layout == "BSND" else out.transpose(1, 2)
    for b, L in enumerate(lens):
        close(out[b], naive(q[b], keys[b], vals[b], 0.25, lambda i, j: j <= i + L - qs)[0])


def test_fused_infer_sparse_modes_in_the_prompt_branch():
    sq, skv = 4, 9
    q, k, v = rnd((1, sq, 2, 16), seed=60), rnd((1, skv, 2, 16), seed=61), rnd((1, skv, 2, 16), seed=62)

    def run(**kw):
        return fia(q, k, v, num_heads=2, input_layout="BSND", scale=0.25, **kw)[0][0]

    off = skv - sq
    close(run(atten_mask=COMPRESSED, sparse_mode=3), naive(q[0], k[0], v[0], 0.25, lambda i, j: j <= i + off)[0])
    close(run(atten_mask=COMPRESSED, sparse_mode=2), naive(q[0], k[0], v[0], 0.25, lambda i, j: j <= i)[0])
    close(run(atten_mask=COMPRESSED, sparse_mode=4, pre_tokens=2, next_tokens=1),
          naive(q[0], k[0], v[0], 0.25, lambda i, j: i + off - 2 <= j <= i + off + 1)[0])
    full = torch.rand(sq, skv, generator=torch.Generator().manual_seed(5)) > 0.5
    full[:, -1] = False
    close(run(atten_mask=full, sparse_mode=1), naive(q[0], k[0], v[0], 0.25, lambda i, j: not bool(full[i, j]))[0])
    close(run(atten_mask=full.view(1, 1, sq, skv), sparse_mode=0),
          naive(q[0], k[0], v[0], 0.25, lambda i, j: not bool(full[i, j]))[0])


def test_fused_infer_decode_mask_is_b_by_kv_s():
    q, k = rnd((2, 1, 2, 16), seed=63), rnd((2, 6, 2, 16), seed=64)
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)  # a (B, KV_S) window
    out = fia(q, k, k, num_heads=2, input_layout="BSND", atten_mask=mask, scale=0.5)[0]
    for b in range(2):
        close(out[b], naive(q[b], k[b], k[b], 0.5, lambda i, j: not bool(mask[b, j]))[0])


def test_fused_infer_tnd_is_cumulative():
    n, d = 8, 192
    q, k, v = rnd((7, n, d), torch.bfloat16, 70), rnd((12, n, d), torch.bfloat16, 71), rnd((12, n, 128), torch.bfloat16, 72)
    out, lse = fia(q, k, v, num_heads=n, input_layout="TND", scale=0.1, actual_seq_lengths=[3, 7],
                   actual_seq_lengths_kv=[5, 12], atten_mask=COMPRESSED, sparse_mode=3, softmax_lse_flag=True)
    assert out.shape == (7, n, 128) and lse.shape == (7, n, 1)
    close(out[:3], naive(q[:3], k[:5], v[:5], 0.1, lambda i, j: j <= i + 2)[0], torch.bfloat16)
    close(out[3:], naive(q[3:], k[5:], v[5:], 0.1, lambda i, j: j <= i + 3)[0], torch.bfloat16)


def test_fused_infer_refuses_what_the_docs_refuse():
    q, k = rnd((1, 3, 2, 16)), rnd((2, 16, 32))
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    with pytest.raises(NpuOperatorError, match="block_size=16 with Q_S > 1"):
        fia(q, k, k, num_heads=2, input_layout="BSND", block_table=table, block_size=16, actual_seq_lengths_kv=[20])
    with pytest.raises(NpuOperatorError, match="actual_seq_lengths_kv"):
        fia(q, k, k, num_heads=2, input_layout="BSND", block_table=table, block_size=16)
    with pytest.raises(NpuOperatorError, match="sparse_mode=3 needs atten_mask"):
        fia(q, q, q, num_heads=2, input_layout="BSND", sparse_mode=3)
    with pytest.raises(NpuOperatorError, match="float16 or bfloat16"):
        fia(q.float(), q.float(), q.float(), num_heads=2, input_layout="BSND")
    with pytest.raises(NpuOperatorError, match="TND"):
        fia(rnd((4, 2, 64)), rnd((4, 2, 64)), rnd((4, 2, 64)), num_heads=2, input_layout="TND",
            actual_seq_lengths=[4], actual_seq_lengths_kv=[4])
    with pytest.raises(NpuOperatorError, match="multiple of 16"):
        fia(rnd((1, 3, 2, 24)), rnd((1, 3, 2, 24)), rnd((1, 3, 2, 24)), num_heads=2, input_layout="BSND")
    with pytest.raises(CapabilityError, match="quant_scale2"):
        fia(q, q, q, num_heads=2, input_layout="BSND", quant_scale2=torch.ones(1))


def test_every_npu_operator_the_shim_calls_is_simulated():
    """`_npu().<op>` / `torch_npu.<op>` calls in the replacements and the kernel library name only simulated operators."""
    import ast
    from pathlib import Path

    from cudashim.emulated.npu.ops import OPERATORS

    pkg = Path(__file__).resolve().parents[2] / "cudashim"
    called = set()
    for path in [*(pkg / "replacements").rglob("*.py"), *(pkg / "kernels").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("npu_"):
                base = node.value
                if (isinstance(base, ast.Name) and base.id == "torch_npu") or (
                        isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "_npu"):
                    called.add(node.attr)
    assert called == {"npu_fusion_attention", "npu_fused_infer_attention_score"}
    assert called <= set(OPERATORS)
