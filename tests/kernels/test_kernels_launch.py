"""The TileLang backends' shared host side (cudashim.kernels._launch) on CPU, with stand-in programs.

A compiled program needs a GPU or an NPU, but what the launcher hands it does not: each stand-in
below checks that its buffers have the shapes and dtypes the `_program` signatures declare (rows
2-D, slots int64, scale bytes uint8) and does the program's work with naive loops. The launcher's
results are then compared with the torch backend, so a wrong view, a lost write-back of a strided
q, or a scale container read with the wrong width shows here, without a device.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cudashim.kernels import _launch  # noqa: E402
from cudashim.errors import KernelArgumentError  # noqa: E402
from cudashim.kernels.torch import block_tables, norm, quant, rope, store_kv_cache  # noqa: E402
from cudashim.kernels.torch._ue8m0 import quantize_groups  # noqa: E402


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("fp8", [False, True])
def test_store_launcher_views_cache_slots_and_scale_bytes_as_the_program_declares(fp8):
    nb, bs, h, d, g = 4, 8, 2, 64, 32
    row = h * d

    def program(rows, slots, pages, sf=None):
        assert rows.shape == (5, row) and slots.dtype == torch.int64 and pages.shape == (nb, bs, row)
        for t, s in enumerate(slots.tolist()):
            if s < 0:
                continue
            if sf is None:
                pages[s // bs, s % bs] = rows[t]
                continue
            assert sf.dtype == torch.uint8 and sf.shape == (nb, bs, row // g)
            q, e = quantize_groups(rows[t], g)
            pages[s // bs, s % bs] = q
            sf[s // bs, s % bs] = e

    x = torch.randn(5, h, d, generator=_gen(0)).bfloat16()
    slots = torch.tensor([3, -1, 17, 30, 8], dtype=torch.int32)  # int32, as engines often keep it
    cache_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    caches = [torch.zeros(nb, bs, h, d, dtype=cache_dtype) for _ in range(2)]
    sfs = [torch.zeros(nb, bs, row // g // 2, dtype=torch.int16) for _ in range(2)]  # Ascend's container
    _launch.launch_store_kv_cache(program, row, bs, "bfloat16", fp8, g)(x, caches[0], slots, sfs[0] if fp8 else None)
    store_kv_cache.store_kv_cache_tl(row, bs, fp8=fp8, group_size=g)(x, caches[1], slots, sfs[1] if fp8 else None)
    assert torch.equal(caches[0].view(torch.uint8), caches[1].view(torch.uint8))
    assert torch.equal(sfs[0], sfs[1])
    assert caches[0].view(torch.uint8).any()


def test_store_launcher_refuses_wrong_dtype_block_size_and_missing_scales():
    store = _launch.launch_store_kv_cache(lambda *a: None, 64, 8, "bfloat16", True, 32)
    x = torch.zeros(2, 64, dtype=torch.bfloat16)
    cache = torch.zeros(3, 8, 64, dtype=torch.float8_e4m3fn)
    slots = torch.tensor([0, 1])
    with pytest.raises(KernelArgumentError, match="x is torch.float16"):
        store(x.half(), cache, slots)
    with pytest.raises(KernelArgumentError, match="cache block size is 4"):
        store(x, cache[:, :4], slots)
    with pytest.raises(KernelArgumentError, match="needs cache_sf"):
        store(x, cache, slots)


@pytest.mark.parametrize("residual", [False, True])
def test_norm_launcher_gives_rows_and_returns_outputs_in_the_callers_shape(residual):
    hidden, eps = 48, 1e-6

    def program(rows, w, *rest):
        assert rows.dim() == 2 and rows.shape[1] == hidden
        if residual:
            r, y, s = rest
            s.copy_((rows.float() + r.float()).to(rows.dtype))
            src = s
        else:
            (y,) = rest
            src = rows
        for i in range(src.shape[0]):
            v = src[i].double()
            y[i] = (v / (v.square().mean() + eps).sqrt() * w.double()).to(y.dtype)

    x = torch.randn(2, 3, hidden, generator=_gen(1)).bfloat16()
    w = torch.randn(hidden, generator=_gen(2)).bfloat16()
    res = torch.randn(2, 3, hidden, generator=_gen(3)).bfloat16() if residual else None
    got = _launch.launch_rms_norm(program, hidden, residual, "bfloat16")(x, w, res)
    want = norm.rms_norm_tl(hidden, eps=eps, residual=residual)(x, w, res)
    got, want = (got, want) if residual else ((got,), (want,))
    for a, b in zip(got, want):
        assert a.shape == x.shape
        torch.testing.assert_close(a.float(), b.float(), atol=2e-2, rtol=2e-2)
    with pytest.raises(KernelArgumentError, match="built with residual"):
        _launch.launch_rms_norm(program, hidden, residual, "bfloat16")(x, w, None if residual else x)


def test_rope_launcher_writes_back_strided_q_and_k_views_of_a_fused_qkv():
    hq, hk, d, n, max_pos = 4, 2, 32, 3, 16
    half = d // 2

    def program(pos, q2, k2, cs):
        assert pos.dtype == torch.int64 and cs.dtype == torch.float32
        assert q2.is_contiguous() and q2.shape == (n, hq * d) and k2.shape == (n, hk * d)
        for t2, heads in ((q2, hq), (k2, hk)):
            for tok in range(n):
                c, s = cs[pos[tok], :half], cs[pos[tok], half:]
                for h in range(heads):
                    v = t2[tok, h * d : (h + 1) * d].float()
                    a, b = v[:half].clone(), v[half:].clone()
                    t2[tok, h * d : h * d + half] = (a * c - b * s).to(t2.dtype)
                    t2[tok, h * d + half : (h + 1) * d] = (b * c + a * s).to(t2.dtype)

    qkvs = [torch.randn(n, (hq + 2 * hk) * d, generator=_gen(4)).bfloat16() for _ in range(2)]
    cs = torch.randn(max_pos, d, generator=_gen(5))
    pos = torch.tensor([0, 7, 15], dtype=torch.int32)
    outs = []
    for qkv, fn in zip(qkvs, (_launch.launch_rope(program, "bfloat16"), rope.rope_tl(hq, hk, d))):
        q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]  # strided views, as split() gives
        assert not q.is_contiguous()
        rq, rk = fn(pos, q, k, cs)
        assert rq is q and rk is k
        outs.append(qkv)
    torch.testing.assert_close(outs[0].float(), outs[1].float(), atol=2e-2, rtol=0)


def test_cast_launcher_returns_values_in_xs_shape_and_scales_in_the_container():
    hidden, g = 256, 32

    def program(rows, q, sf):
        assert rows.dim() == 2 and q.dtype == torch.float8_e4m3fn and sf.dtype == torch.uint8
        for i in range(rows.shape[0]):
            q[i], sf[i] = quantize_groups(rows[i], g)

    x = torch.randn(2, 3, hidden, generator=_gen(6)).bfloat16()
    q, sf = _launch.launch_per_token_cast(program, hidden, g, "bfloat16", "int32")(x)
    q_ref, sf_ref = quant.per_token_cast_tl(hidden, group_size=g, sf_dtype="int32")(x)
    assert q.shape == x.shape and sf.dtype == torch.int32
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(sf, sf_ref)


def test_block_tables_launcher_returns_out():
    src = torch.arange(12, dtype=torch.int32).view(2, 6)
    used = torch.tensor([2, 5], dtype=torch.int32)
    outs = [torch.zeros(4, 6, dtype=torch.int32) for _ in range(2)]

    def program(s, u, o):
        for b in range(s.shape[0]):
            for j in range(2):
                for i in range(6):
                    o[b * 2 + j, i] = s[b, i] if i < u[b] else -1

    assert _launch.launch_copy_block_tables(program)(src, used, outs[0]) is outs[0]
    block_tables.copy_block_tables_tl(6, max_seqlen_q=2)(src, used, outs[1])
    assert torch.equal(outs[0], outs[1])


def test_launch_helpers_never_look_like_factories():
    # ops.backend_factories collects every public *_tl name a backend module binds
    assert not [n for n in _launch.__all__ if n.endswith("_tl")]
