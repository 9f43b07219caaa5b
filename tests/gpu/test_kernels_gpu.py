"""On an NVIDIA GPU: every cuda (TileLang) kernel equals the torch backend, within the stated tolerances.

Run on the H200 box (torch 2.11+cu130, tilelang 0.1.15 from the carried wheels) from the repo root:
    python3 -m pytest -q tests/gpu/test_kernels_gpu.py -rs
Tolerances: exact (bit for bit) wherever the kernel only moves or casts bytes (KV store, FP8 cast
with UE8M0 scales, residual sum, block tables); one bf16 ulp (2**-7 relative, 2**-7 absolute
near 0) where float32 arithmetic is re-associated (the RMS reduction order, rsqrtf, FMA contraction
in RoPE). Each parametrisation is one TileLang compile (~10 s), so the set is kept small; the
static shapes match benchmarks/bench_kernels_gpu.py so its compiles are cache hits.
"""

from __future__ import annotations

import pytest
from nvidia_gpu import has_nvidia_gpu

# no NVIDIA GPU: every test here would be skipped by the gpu mark; skip before importing tilelang,
# which every xdist worker would otherwise import at collection
if not has_nvidia_gpu():
    pytest.skip("needs an NVIDIA GPU", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("tilelang", reason="tilelang not installed: pip install the carried .whl-tl/.whl-z3 wheels")

pytestmark = pytest.mark.gpu(torch=True)

from cudashim.kernels.cuda import block_tables as cu_bt  # noqa: E402
from cudashim.kernels.cuda import norm as cu_norm  # noqa: E402
from cudashim.kernels.cuda import quant as cu_quant  # noqa: E402
from cudashim.kernels.cuda import rope as cu_rope  # noqa: E402
from cudashim.kernels.cuda import store_kv_cache as cu_store  # noqa: E402
from cudashim.kernels.torch import block_tables as th_bt  # noqa: E402
from cudashim.kernels.torch import norm as th_norm  # noqa: E402
from cudashim.kernels.torch import quant as th_quant  # noqa: E402
from cudashim.kernels.torch import rope as th_rope  # noqa: E402
from cudashim.kernels.torch import store_kv_cache as th_store  # noqa: E402

DEV = "cuda"
ULP = 2.0**-7


def _slots(n: int, num_blocks: int, block_size: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    s = torch.randperm(num_blocks * block_size, generator=g)[:n]
    s[::7] = -1  # padding tokens
    return s.to(DEV)


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_store_kv_cache_bf16_exact(n):
    row, bs, nb = 1024, 256, 16
    x = torch.randn(n, 8, 128, device=DEV).bfloat16()
    slots = _slots(n, nb, bs, n)
    got = torch.zeros(nb, bs, 8, 128, device=DEV, dtype=torch.bfloat16)
    ref = got.clone()
    cu_store.store_kv_cache_tl(row, bs)(x, got, slots.int())  # int32 slots as nano-vllm passes them
    th_store.store_kv_cache_tl(row, bs)(x, ref, slots)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("group", [32, 128])
def test_store_kv_cache_fp8_exact_bytes(group):
    row, bs, nb, n = 1024, 256, 8, 500
    x = (torch.randn(n, row, device=DEV) * torch.logspace(-4, 4, n, device=DEV)[:, None]).bfloat16()
    slots = _slots(n, nb, bs, group)
    n_sf = row // group
    got, ref = (torch.zeros(nb, bs, row, device=DEV, dtype=torch.float8_e4m3fn) for _ in range(2))
    got_sf, ref_sf = (torch.zeros(nb, bs, n_sf // 4, device=DEV, dtype=torch.int32) for _ in range(2))
    cu_store.store_kv_cache_tl(row, bs, fp8=True, group_size=group)(x, got, slots, got_sf)
    th_store.store_kv_cache_tl(row, bs, fp8=True, group_size=group)(x, ref, slots, ref_sf)
    assert torch.equal(got.view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(got_sf, ref_sf)


@pytest.mark.parametrize("hidden,residual", [(4096, False), (7168, True)])
def test_rms_norm_within_one_bf16_ulp(hidden, residual):
    m = 333
    x = (torch.randn(m, hidden, device=DEV) * 4).bfloat16()
    w = torch.randn(hidden, device=DEV).bfloat16()
    r = torch.randn(m, hidden, device=DEV).bfloat16() if residual else None
    got = cu_norm.rms_norm_tl(hidden, residual=residual)(x, w, r)
    ref = th_norm.rms_norm_tl(hidden, residual=residual)(x, w, r)
    if residual:
        assert torch.equal(got[1], ref[1])  # the residual sum is rounded the same way
        got, ref = got[0], ref[0]
    torch.testing.assert_close(got.float(), ref.float(), rtol=ULP, atol=ULP)


@pytest.mark.parametrize("neox,rot", [(True, 128), (False, 64)])
def test_rope_within_one_bf16_ulp(neox, rot):
    n, hq, hk, d, max_pos = 777, 32, 8, 128, 4096
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2, device=DEV).float() / rot))
    ang = torch.arange(max_pos, device=DEV).float()[:, None] * inv
    cache = torch.cat((ang.cos(), ang.sin()), -1)
    pos = torch.randint(0, max_pos, (n,), device=DEV)
    qkv = torch.randn(n, (hq + 2 * hk) * d, device=DEV).bfloat16()
    q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]  # strided views, as engines pass them
    q2, k2 = q.clone(), k.clone()
    cu_rope.rope_tl(hq, hk, d, rotary_dim=rot, is_neox=neox)(pos, q, k, cache)
    th_rope.rope_tl(hq, hk, d, rotary_dim=rot, is_neox=neox)(pos, q2, k2, cache)
    torch.testing.assert_close(q.float(), q2.float(), rtol=ULP, atol=ULP)
    torch.testing.assert_close(k.float(), k2.float(), rtol=ULP, atol=ULP)


@pytest.mark.parametrize("group", [32, 64, 128])
def test_per_token_cast_exact_bytes(group):
    m, hidden = 1000, 7168
    x = (torch.randn(m, hidden, device=DEV) * torch.logspace(-6, 6, m, device=DEV)[:, None]).bfloat16()
    x[3, :group] = 0
    q, sf = cu_quant.per_token_cast_tl(hidden, group_size=group, sf_dtype="int32")(x)
    q2, sf2 = th_quant.per_token_cast_tl(hidden, group_size=group, sf_dtype="int32")(x)
    assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8))
    assert torch.equal(sf, sf2)


@pytest.mark.parametrize("q_len", [2])
def test_copy_block_tables_exact(q_len):
    b, width, max_nb = 300, 600, 512
    src = torch.randint(0, 10**6, (b, width), device=DEV, dtype=torch.int32)
    used = torch.randint(0, max_nb + 1, (b,), device=DEV, dtype=torch.int32)
    got = torch.full((b * q_len, max_nb), 5, device=DEV, dtype=torch.int32)
    ref = got.clone()
    cu_bt.copy_block_tables_tl(max_nb, max_seqlen_q=q_len)(src, used, got)
    th_bt.copy_block_tables_tl(max_nb, max_seqlen_q=q_len)(src, used, ref)
    assert torch.equal(got, ref)
