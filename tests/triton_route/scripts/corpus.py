"""The corpus: unmodified Triton kernels of pinned libraries on the emulated device, each against
its torch reference (or a float64 oracle). One JSON line at the end: case -> ["ok", detail] or
[exception type, message]; detail holds the largest error and whether it is within tolerance.

Run under `cudashim run --platform cpu`. Subjects (tests/requirements-subjects.txt): liger-kernel,
fla-core (flash-linear-attention's kernels), trinix, nano-vllm-fork.
"""

from __future__ import annotations

import json
import sys

import torch
import triton

DEV = "cuda"
# the first host line of Triton's tutorials, as they write it
DEVICE = triton.runtime.driver.active.get_active_torch_device()
out: dict[str, list] = {}


def case(name: str, fn) -> None:
    try:
        out[name] = ["ok", fn()]
    except BaseException as e:  # noqa: BLE001
        import traceback

        out[name] = [type(e).__name__, str(e)[:600] + traceback.format_exc()[-1500:]]


def close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> dict:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    err = float((a - b).abs().max()) if a.numel() else 0.0
    return {"max_err": err, "ok": bool(torch.allclose(a, b, atol=atol, rtol=rtol)) and not bool(a.isnan().any())}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def rnd(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen(seed)).to(dtype).to(DEV)


# ---- the patterns of Triton's tutorials, in pinned libraries' kernels ----
# The tutorials themselves are in no distribution on PyPI (the triton wheels leave python/tutorials out
# and there is no sdist), so each of their patterns is taken from a pinned library that ships it.


def host_driver_device():
    x = torch.ones(4, device=DEVICE)
    return {"device": str(DEVICE), "tensor_device": str(x.device),
            "ok": str(DEVICE) == "cuda:0" and x.device == torch.device(DEV, 0)}


def fla_vector_add():
    # fla-core's elementwise add: one block of BLOCK elements per program, masked at n_elements
    from fla.modules.causal_conv1d.backends.triton_ascend import _launch_add

    x = torch.randn(5000, generator=gen(1)).to(DEVICE)
    y = torch.randn(5000, generator=gen(2)).to(DEVICE)
    return close(_launch_add(x, y), x + y, 0, 0)


def liger_softmax():
    # Liger's fused softmax: one program per row, the whole row in one block (forward and backward)
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    x = rnd(37, 181, seed=3).requires_grad_(True)
    dy = rnd(37, 181, seed=29)
    y = LigerSoftmaxFunction.apply(x)
    y.backward(dy)
    g = x.grad.clone()
    x.grad = None
    ref = torch.softmax(x, dim=1)
    ref.backward(dy)
    res = {"y": close(y, ref, 1e-6, 1e-5), "dx": close(g, x.grad, 1e-6, 1e-5)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


def trinix_layer_norm():
    # trinix's layer norm: the forward kernel, and the backward whose programs add their partial dW/dB
    # into GROUP_SIZE_M buffers under a spin lock (atomic_cas/atomic_xchg); rows of 1100 make it 128
    # groups, so with 140 rows 12 of them take the lock a second time and accumulate
    from trinix.kernels.layernorm_kernel import TritonLayerNormFunction

    M, N = 140, 1100
    x = rnd(M, N, seed=4).requires_grad_(True)
    w, b = rnd(N, seed=5).requires_grad_(True), rnd(N, seed=6).requires_grad_(True)
    dy = rnd(M, N, seed=7)
    y = TritonLayerNormFunction.apply(x, w, b, 1e-5)
    y.backward(dy)
    grads = [x.grad.clone(), w.grad.clone(), b.grad.clone()]
    x.grad = w.grad = b.grad = None
    ref = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
    ref.backward(dy)
    res = {"y": close(y, ref, 1e-5, 1e-5)}
    for name, g, r in zip(("dx", "dw", "db"), grads, (x.grad, w.grad, b.grad)):
        res[name] = close(g, r, 1e-4, 1e-4)
    res["ok"] = all(v["ok"] for v in res.values())
    return res


def fla_matmul():
    # fla-core's matmul (adapted from the tutorial's): @triton.heuristics over @triton.autotune over the
    # kernel, fusing a nested @triton.jit activation; sigmoid nests one level deeper (fla's exp)
    from fla.ops.utils.matmul import matmul, matmul_kernel

    a, b = rnd(96, 80, seed=8, dtype=torch.float16), rnd(80, 72, seed=9, dtype=torch.float16)
    prod = a.double() @ b.double()
    res = {"leaky_relu": close(matmul(a, b, activation="leaky_relu"),
                               torch.nn.functional.leaky_relu(prod, 0.01), 1e-2, 1e-2),
           "sigmoid": close(matmul(a, b, activation="sigmoid"), torch.sigmoid(prod), 1e-3, 1e-2)}
    res["ok"] = all(v["ok"] for v in res.values())
    res["chosen"] = matmul_kernel.fn.best_config.kwargs
    return res


# ---- Liger-Kernel ----

def _rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    # HuggingFace Llama's RMSNorm (Liger's casting_mode="llama")
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def _rms(dtype: torch.dtype, atol: float, rtol: float):
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    x = rnd(6, 10, 96, seed=10, dtype=dtype).requires_grad_(True)
    w = (rnd(96, seed=11) * 0.5 + 1).to(dtype).requires_grad_(True)
    dy = rnd(6, 10, 96, seed=12, dtype=dtype)
    y = LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False)
    y.backward(dy)
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ref = _rms_ref(x, w, 1e-6)
    ref.backward(dy)
    res = {"y": close(y, ref, atol, rtol), "dx": close(gx, x.grad, atol * 4, rtol * 4),
           "dw": close(gw, w.grad, atol * 40, rtol * 4)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


def liger_rmsnorm_fp32():
    return _rms(torch.float32, 1e-5, 1e-5)


def liger_rmsnorm_bf16():
    return _rms(torch.bfloat16, 2e-2, 2e-2)


def liger_cross_entropy():
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction

    # Liger computes the gradient into its input's memory: it gets its own copy
    x = rnd(16, 500, seed=13).requires_grad_(True)
    xl = x.detach().clone().requires_grad_(True)
    target = torch.randint(0, 500, (16,), generator=gen(14)).to(DEV)
    target[3] = -100
    loss = LigerCrossEntropyFunction.apply(xl, target, None, -100)[0]
    loss.backward()
    g = xl.grad.clone()
    ref = torch.nn.functional.cross_entropy(x, target, ignore_index=-100)
    ref.backward()
    res = {"loss": close(loss, ref, 1e-5, 1e-5), "dx": close(g, x.grad, 1e-6, 1e-4)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


def liger_swiglu():
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    # Liger's backward writes the gradients into the saved inputs' memory: they get their own copies
    a, b = rnd(8, 200, seed=15).requires_grad_(True), rnd(8, 200, seed=16).requires_grad_(True)
    al, bl = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    dc = rnd(8, 200, seed=17)
    c = LigerSiLUMulFunction.apply(al, bl)
    c.backward(dc)
    ga, gb = al.grad.clone(), bl.grad.clone()
    ref = torch.nn.functional.silu(a) * b
    ref.backward(dc)
    res = {"c": close(c, ref, 1e-6, 1e-5), "da": close(ga, a.grad, 1e-5, 1e-5), "db": close(gb, b.grad, 1e-6, 1e-5)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


def liger_rope():
    from liger_kernel.ops.rope import LigerRopeFunction

    bsz, hq, hk, T, D = 2, 4, 2, 6, 32
    q, k = rnd(bsz, hq, T, D, seed=18).requires_grad_(True), rnd(bsz, hk, T, D, seed=19).requires_grad_(True)
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.arange(T).float(), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[None].to(DEV), emb.sin()[None].to(DEV)
    dq, dk = rnd(bsz, hq, T, D, seed=20), rnd(bsz, hk, T, D, seed=21)
    qo, ko = LigerRopeFunction.apply(q, k, cos, sin)
    torch.autograd.backward((qo, ko), (dq, dk))
    gq, gk = q.grad.clone(), k.grad.clone()
    q.grad = k.grad = None

    def rot(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return torch.cat((-x2, x1), dim=-1)

    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    qr, kr = q * c + rot(q) * s, k * c + rot(k) * s
    torch.autograd.backward((qr, kr), (dq, dk))
    res = {"q": close(qo, qr, 1e-5, 1e-5), "k": close(ko, kr, 1e-5, 1e-5), "dq": close(gq, q.grad, 1e-5, 1e-5),
           "dk": close(gk, k.grad, 1e-5, 1e-5)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


# ---- flash-linear-attention (fla-core) ----

def fla_chunk_local_cumsum():
    from fla.ops.utils.cumsum import chunk_local_cumsum

    B, T, H, C = 2, 40, 2, 16
    g = rnd(B, T, H, seed=22)
    got = chunk_local_cumsum(g, chunk_size=C)
    ref = torch.cat([g[:, i:i + C].double().cumsum(1) for i in range(0, T, C)], dim=1)
    return close(got, ref, 1e-5, 1e-5)


def fla_chunk_simple_gla():
    from fla.ops.simple_gla import chunk_simple_gla

    B, T, H, K, V = 1, 40, 2, 16, 16
    q, k, v = rnd(B, T, H, K, seed=23), rnd(B, T, H, K, seed=24), rnd(B, T, H, V, seed=25)
    g = -torch.rand(B, T, H, generator=gen(26)).to(DEV) * 0.5  # log decay per step
    o, ht = chunk_simple_gla(q, k, v, g=g, scale=K ** -0.5, output_final_state=True)
    # float64 oracle: the recurrence S_t = exp(g_t) S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t
    qd, kd, vd, gd = (x.double().cpu() for x in (q, k, v, g))
    S = torch.zeros(B, H, K, V, dtype=torch.float64)
    ref = torch.zeros(B, T, H, V, dtype=torch.float64)
    for t in range(T):
        S = S * gd[:, t].exp()[..., None, None] + kd[:, t, :, :, None] * vd[:, t, :, None, :]
        ref[:, t] = torch.einsum("bhk,bhkv->bhv", qd[:, t] * K ** -0.5, S)
    res = {"o": close(o, ref, 1e-4, 1e-4), "final_state": close(ht, S, 1e-4, 1e-4)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


# ---- nano-vllm ----

def nano_vllm_store_kvcache():
    from nanovllm.layers.attention import store_kvcache

    N, heads, hd, blocks, block_size = 5, 2, 16, 3, 4  # nano-vllm's cache: [blocks, block_size, heads, head_dim]
    key, value = rnd(N, heads, hd, seed=27), rnd(N, heads, hd, seed=28)
    k_cache = torch.zeros(blocks, block_size, heads, hd, device=DEV)
    v_cache = torch.zeros(blocks, block_size, heads, hd, device=DEV)
    slot_mapping = torch.tensor([7, 0, -1, 11, 3], device=DEV)
    store_kvcache(key, value, k_cache, v_cache, slot_mapping)
    rk, rv = torch.zeros_like(k_cache).view(-1, heads, hd), torch.zeros_like(v_cache).view(-1, heads, hd)
    for i, s in enumerate(slot_mapping.tolist()):
        if s >= 0:
            rk[s], rv[s] = key[i], value[i]
    rk, rv = rk.view_as(k_cache), rv.view_as(v_cache)
    res = {"k": close(k_cache, rk, 0, 0), "v": close(v_cache, rv, 0, 0)}
    res["ok"] = all(v["ok"] for v in res.values())
    return res


CASES = {f.__name__: f for f in (host_driver_device, fla_vector_add, liger_softmax, trinix_layer_norm, fla_matmul,
                                  liger_rmsnorm_fp32,
                                  liger_rmsnorm_bf16, liger_cross_entropy, liger_swiglu, liger_rope,
                                  fla_chunk_local_cumsum, fla_chunk_simple_gla, nano_vllm_store_kvcache)}

if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        case(name, CASES[name])
    print(json.dumps(out))
