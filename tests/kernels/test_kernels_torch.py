"""The torch backend (CPU implementation and oracle of the TileLang backends) against naive float64 loops."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from cudashim.errors import KernelArgumentError  # noqa: E402
from cudashim.kernels.torch.block_tables import copy_block_tables_tl  # noqa: E402
from cudashim.kernels.torch.norm import rms_norm_tl  # noqa: E402
from cudashim.kernels.torch.quant import per_token_cast_tl  # noqa: E402
from cudashim.kernels.torch.rope import rope_tl  # noqa: E402
from cudashim.kernels.torch.store_kv_cache import store_kv_cache_tl  # noqa: E402

E4M3_REL = 2.0**-4  # e4m3 keeps 3 mantissa bits: round-to-nearest error <= half an ulp = 2**-4 relative


def _naive_scale_exp(group: list[float]) -> int:
    amax = max(max(abs(v) for v in group), 1e-4)
    return math.ceil(math.log2(amax / 448.0))


# ---------------------------------------------------------------- store_kv_cache


def test_store_kv_cache_bf16_writes_each_slot_and_skips_minus_one():
    g = torch.Generator().manual_seed(0)
    nb, bs, h, d, n = 5, 4, 2, 16, 9
    key = torch.randn(n, h, d, generator=g).bfloat16()
    cache = torch.zeros(nb, bs, h, d, dtype=torch.bfloat16)
    slots = torch.randperm(nb * bs, generator=g)[:n]
    slots[3] = -1
    slots[7] = -1
    store_kv_cache_tl(h * d, bs)(key, cache, slots)
    expected = torch.zeros_like(cache)
    for t in range(n):
        s = int(slots[t])
        if s < 0:
            continue
        expected[s // bs, s % bs] = key[t]
    assert torch.equal(cache, expected)


def test_store_kv_cache_serves_nano_vllm_store_kvcache_call_shape():
    # nano-vllm: store_kvcache(key, value, k_cache, v_cache, slot_mapping), caches (blocks, bs, H, D)
    g = torch.Generator().manual_seed(1)
    kv_cache = torch.zeros(2, 3, 6, 8, 2, 32, dtype=torch.bfloat16)  # (k/v, layers, blocks, bs, H, D)
    k_cache, v_cache = kv_cache[0, 1], kv_cache[1, 1]
    key, value = torch.randn(2, 5, 2, 32, generator=g).bfloat16()
    slots = torch.tensor([0, 9, -1, 47, 20])

    def store_kvcache(key, value, k_cache, v_cache, slot_mapping):  # the 5-line user adapter
        store = store_kv_cache_tl(key.shape[1] * key.shape[2], k_cache.shape[1])
        store(key, k_cache, slot_mapping)
        store(value, v_cache, slot_mapping)

    store_kvcache(key, value, k_cache, v_cache, slots)
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            assert torch.equal(kv_cache[0, 1, s // 8, s % 8], key[t])
            assert torch.equal(kv_cache[1, 1, s // 8, s % 8], value[t])
    assert kv_cache[:, 0].abs().sum() == 0 and kv_cache[:, 2].abs().sum() == 0  # other layers untouched
    assert int((kv_cache[0, 1] != 0).any(-1).any(-1).sum()) == 4


@pytest.mark.parametrize("sf_dtype,pack", [(torch.int32, 4), (torch.int16, 2)])
def test_store_kv_cache_fp8_ue8m0_packs_scales_per_container(sf_dtype, pack):
    g = torch.Generator().manual_seed(2)
    nb, bs, row, group, n = 3, 4, 256, 32, 7
    x = (torch.randn(n, row, generator=g) * torch.logspace(-3, 3, n)[:, None]).bfloat16()
    cache = torch.zeros(nb, bs, row, dtype=torch.float8_e4m3fn)
    n_sf = row // group
    cache_sf = torch.zeros(nb, bs, n_sf // pack, dtype=sf_dtype)
    slots = torch.tensor([11, 0, -1, 5, 3, -1, 8])
    store_kv_cache_tl(row, bs, fp8=True, group_size=group)(x, cache, slots, cache_sf)
    for t, s in enumerate(slots.tolist()):
        b, o = divmod(s, bs)
        if s < 0:
            continue
        words = cache_sf[b, o].tolist()
        for j in range(n_sf):
            # the UE8M0 byte of group j sits in container j // pack, at byte j % pack (little-endian)
            byte = (words[j // pack] >> (8 * (j % pack))) & 0xFF
            grp = x[t, j * group : (j + 1) * group].double().tolist()
            e = _naive_scale_exp(grp)
            assert byte == e + 127
            for i, v in enumerate(grp):
                got = float(cache[b, o, j * group + i]) * 2.0**e
                assert abs(got - v) <= E4M3_REL * abs(v) + 2.0**e * 2.0**-9  # ulp of e4m3 subnormals
    written = {s for s in slots.tolist() if s >= 0}
    for s in range(nb * bs):
        if s not in written:
            assert cache[s // bs, s % bs].float().abs().sum() == 0
            assert cache_sf[s // bs, s % bs].abs().sum() == 0


def test_store_kv_cache_rejects_mismatched_block_size_and_dtype():
    store = store_kv_cache_tl(8, 4)
    with pytest.raises(KernelArgumentError, match="block size"):
        store(torch.zeros(1, 8).bfloat16(), torch.zeros(2, 2, 8).bfloat16(), torch.tensor([0]))
    with pytest.raises(KernelArgumentError, match="float16"):
        store(torch.zeros(1, 8).half(), torch.zeros(2, 4, 8).half(), torch.tensor([0]))


# ---------------------------------------------------------------- rms_norm


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rms_norm_matches_float64(dtype):
    g = torch.Generator().manual_seed(3)
    m, hidden, eps = 6, 96, 1e-5
    x = (torch.randn(m, hidden, generator=g) * 3).to(dtype)
    w = torch.randn(hidden, generator=g).to(dtype)
    y = rms_norm_tl(hidden, eps=eps, dtype=str(dtype).split(".")[1])(x, w)
    for r in range(m):
        xs = x[r].double().tolist()
        rstd = 1.0 / math.sqrt(sum(v * v for v in xs) / hidden + eps)
        ref = torch.tensor([v * rstd * float(w[i]) for i, v in enumerate(xs)], dtype=torch.float64)
        tol = 1e-5 if dtype == torch.float32 else 2**-8
        assert torch.allclose(y[r].double(), ref, rtol=tol, atol=tol)


def test_rms_norm_with_residual_returns_the_sum_and_normalises_it():
    g = torch.Generator().manual_seed(4)
    m, hidden = 4, 64
    x = torch.randn(m, hidden, generator=g).bfloat16()
    res = torch.randn(m, hidden, generator=g).bfloat16()
    w = torch.rand(hidden, generator=g).bfloat16()
    y, s = rms_norm_tl(hidden, residual=True)(x, w, res)
    for r in range(m):
        sum_ref = [float(torch.tensor(float(x[r, i]) + float(res[r, i])).bfloat16()) for i in range(hidden)]
        assert s[r].double().tolist() == sum_ref
        rstd = 1.0 / math.sqrt(sum(v * v for v in sum_ref) / hidden + 1e-6)
        ref = torch.tensor([v * rstd * float(w[i]) for i, v in enumerate(sum_ref)], dtype=torch.float64)
        assert torch.allclose(y[r].double(), ref, rtol=2**-8, atol=2**-8)
    with pytest.raises(KernelArgumentError, match="residual"):
        rms_norm_tl(hidden, residual=True)(x, w)


# ---------------------------------------------------------------- rope


def _naive_rope(x, pos, cache, heads, head_dim, rot, neox):
    out = x.double().clone().view(x.shape[0], heads, head_dim)
    half = rot // 2
    for t in range(x.shape[0]):
        cos = cache[pos[t], :half].double()
        sin = cache[pos[t], half:].double()
        for h in range(heads):
            v = x.view(x.shape[0], heads, head_dim)[t, h].double()
            for i in range(half):
                a, b = (i, i + half) if neox else (2 * i, 2 * i + 1)
                out[t, h, a] = v[a] * cos[i] - v[b] * sin[i]
                out[t, h, b] = v[b] * cos[i] + v[a] * sin[i]
    return out.view_as(x)


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("rot", [64, 32])
def test_rope_neox_and_interleaved_with_partial_rotary_dim(neox, rot):
    g = torch.Generator().manual_seed(5)
    n, hq, hk, d, max_pos = 5, 4, 2, 64, 50
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2).double() / rot))
    ang = torch.arange(max_pos).double()[:, None] * inv[None, :]
    cache = torch.cat((ang.cos(), ang.sin()), -1).float()
    pos = torch.randint(0, max_pos, (n,), generator=g)
    q = torch.randn(n, hq * d, generator=g).bfloat16()
    k = torch.randn(n, hk, d, generator=g).bfloat16()
    q_ref = _naive_rope(q, pos, cache, hq, d, rot, neox)
    k_ref = _naive_rope(k, pos, cache, hk, d, rot, neox)
    q0, k0 = q.clone(), k.clone()
    qo, ko = rope_tl(hq, hk, d, rotary_dim=rot, is_neox=neox)(pos, q, k, cache)
    assert qo.data_ptr() == q.data_ptr() and ko.data_ptr() == k.data_ptr()  # in place
    assert torch.allclose(q.double(), q_ref, rtol=2**-7, atol=2**-7)
    assert torch.allclose(k.double(), k_ref, rtol=2**-7, atol=2**-7)
    if rot < d:  # the unrotated tail passes through bit for bit
        assert torch.equal(q.view(n, hq, d)[..., rot:], q0.view(n, hq, d)[..., rot:])
        assert torch.equal(k[..., rot:], k0[..., rot:])


def test_rope_rejects_odd_or_too_wide_rotary_dim():
    with pytest.raises(KernelArgumentError, match="rotary_dim"):
        rope_tl(1, 1, 64, rotary_dim=65)
    with pytest.raises(KernelArgumentError, match="rotary_dim"):
        rope_tl(1, 1, 64, rotary_dim=128)


# ---------------------------------------------------------------- per_token_cast


@pytest.mark.parametrize("group", [32, 64, 128])
def test_per_token_cast_power_of_two_scales_against_naive(group):
    g = torch.Generator().manual_seed(6)
    m, hidden = 5, 512
    x = (torch.randn(m, hidden, generator=g) * torch.logspace(-6, 4, m)[:, None]).bfloat16()
    x[2, :group] = 0  # an all-zero group takes the amax floor
    q, sf = per_token_cast_tl(hidden, group_size=group, sf_dtype="int32")(x)
    assert q.dtype == torch.float8_e4m3fn and sf.dtype == torch.int32
    assert sf.shape == (m, hidden // group // 4)
    sf_bytes = sf.view(torch.uint8)
    for r in range(m):
        for j in range(hidden // group):
            grp = x[r, j * group : (j + 1) * group].double().tolist()
            e = _naive_scale_exp(grp)
            assert int(sf_bytes[r, j]) == e + 127
            # exact: x * 2**-e is exact in float64, then one rounding to e4m3
            ref = torch.tensor([v * 2.0**-e for v in grp], dtype=torch.float64).clamp(-448, 448)
            assert torch.equal(q[r, j * group : (j + 1) * group].double(), ref.to(torch.float8_e4m3fn).double())
    assert q.float().abs().max() <= 448


def test_per_token_cast_int16_container_holds_two_scales_and_checks_fit():
    x = torch.randn(3, 64).bfloat16()
    _, sf16 = per_token_cast_tl(64, group_size=32, sf_dtype="int16")(x)
    assert sf16.shape == (3, 1) and sf16.dtype == torch.int16
    with pytest.raises(KernelArgumentError, match="int32"):
        per_token_cast_tl(64, group_size=32, sf_dtype="int32")  # 2 scales cannot fill an int32
    with pytest.raises(KernelArgumentError, match="group_size"):
        per_token_cast_tl(64, group_size=16)


# ---------------------------------------------------------------- copy_block_tables


@pytest.mark.parametrize("q_len", [1, 3])
def test_copy_block_tables_copies_used_blocks_and_fills_the_rest(q_len):
    g = torch.Generator().manual_seed(7)
    b, width, max_nb = 4, 12, 8
    src = torch.randint(0, 1000, (b, width), generator=g, dtype=torch.int32)
    used = torch.tensor([0, 8, 3, 5], dtype=torch.int32)
    out = torch.full((b * q_len, max_nb), 77, dtype=torch.int32)
    ret = copy_block_tables_tl(max_nb, max_seqlen_q=q_len)(src, used, out)
    assert ret is out
    for r in range(b):
        for j in range(q_len):
            for i in range(max_nb):
                want = int(src[r, i]) if i < int(used[r]) else -1
                assert int(out[r * q_len + j, i]) == want


def test_factories_cache_per_static_params():
    assert rms_norm_tl(128) is rms_norm_tl(128)
    assert rms_norm_tl(128) is not rms_norm_tl(256)


def test_per_token_cast_scale_exponent_at_exact_powers_of_two_boundaries():
    # amax = 448 * 2**k exactly is the tie: the scale must be 2**k, not 2**(k+1)
    amaxes = [448.0, 450.0, 224.0, 226.0, 448.0 * 2**-10, 7.0, 1e-6, 0.0]
    x = torch.zeros(len(amaxes), 32)
    x[:, 5] = torch.tensor(amaxes)
    x[:, 9] = -torch.tensor(amaxes) / 3
    x = x.bfloat16()
    q, sf = per_token_cast_tl(32, group_size=32, sf_dtype="uint8")(x)
    for r in range(len(amaxes)):
        assert int(sf[r, 0]) - 127 == _naive_scale_exp(x[r].double().tolist())
        assert float(q[r].float().abs().max()) <= 448
