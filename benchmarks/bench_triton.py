"""Triton kernels on the emulated device: each corpus kernel against its torch equivalent and against
Triton's stock interpreter, in one run; and nano-vllm's decode-step KV store on a 128 MiB cache with
and without the storage copy.

One child under `cudashim run --platform cpu` times, per kernel (minimum of --reps after a warm-up):
  route     kernel[grid](...) as the program launches it: the route's batched execution, in place (the
            in-place interpreter where it declines)
  torch     the same computation with torch operators on the device
  stock     the same launch through Triton's own GridExecutor, which copies every argument's whole
            storage to the host and back (the route's gap fixes stay on, so it computes the same thing:
            stock without them cannot run several of these kernels at all)
Figures: route / torch and route / stock per kernel (lower is better for the route), and the KV store's
times with and without the copy. The speed of the interpreter itself is the next issue's.

    python benchmarks/bench_triton.py [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]


def _child(reps: int) -> None:
    import torch

    from cudashim.triton_route import _batched as route_batched
    from cudashim.triton_route import add_executor, interpreter, remove_executor

    torch.set_num_threads(1)
    D = "cuda"
    g = torch.Generator().manual_seed(0)

    def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype).to(D)

    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    # the patterns of Triton's tutorials, as pinned libraries ship them (tests/triton_route/test_corpus.py)
    from fla.modules.causal_conv1d.backends.triton_ascend import _launch_add
    from fla.ops.utils.matmul import matmul
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    from trinix.kernels.layernorm_kernel import TritonLayerNormFunction

    x, y = r(4096), r(4096)
    cases["fla vector add (4096)"] = (lambda: _launch_add(x, y), lambda: x + y)
    s = r(64, 256)
    cases["liger fused softmax fwd (64x256)"] = (lambda: LigerSoftmaxFunction.apply(s), lambda: torch.softmax(s, 1))
    ln_x, ln_w, ln_b = r(32, 256), r(256), r(256)
    cases["trinix layer norm fwd (32x256)"] = (lambda: TritonLayerNormFunction.apply(ln_x, ln_w, ln_b, 1e-5),
                                              lambda: torch.nn.functional.layer_norm(ln_x, (256,), ln_w, ln_b, 1e-5))
    ln_dy = r(32, 256)

    def ln_bwd(fn: Callable[..., torch.Tensor]) -> Callable[[], Any]:
        def run() -> Any:
            xs, ws, bs = (t.detach().requires_grad_() for t in (ln_x, ln_w, ln_b))
            fn(xs, ws, bs).backward(ln_dy)
            return xs.grad, ws.grad, bs.grad
        return run

    # the backward's partial dW/dB are added under the tutorial's GROUP_SIZE_M spin lock
    cases["trinix layer norm fwd+bwd (32x256)"] = (
        ln_bwd(lambda a, w, b: TritonLayerNormFunction.apply(a, w, b, 1e-5)),
        ln_bwd(lambda a, w, b: torch.nn.functional.layer_norm(a, (256,), w, b, 1e-5)))
    ma, mb = r(128, 128, dtype=torch.float16), r(128, 128, dtype=torch.float16)
    cases["fla matmul + leaky_relu (128^3 fp16)"] = (
        lambda: matmul(ma, mb, "leaky_relu"), lambda: torch.nn.functional.leaky_relu(ma @ mb, 0.01))

    from liger_kernel.ops.cross_entropy import cross_entropy_forward
    from liger_kernel.ops.rms_norm import rms_norm_forward
    from liger_kernel.ops.rope import rope_forward
    from liger_kernel.ops.swiglu import swiglu_forward

    rx, rw = r(64, 256), r(256)
    rxb, rwb = rx.bfloat16(), rw.bfloat16()

    def rms_ref(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        af = a.float()
        return w * (af * torch.rsqrt(af.pow(2).mean(-1, keepdim=True) + 1e-6)).to(a.dtype)

    cases["liger rmsnorm fp32 (64x256)"] = (lambda: rms_norm_forward(rx, rw, 1e-6, 0.0, "llama", None),
                                           lambda: rms_ref(rx, rw))
    cases["liger rmsnorm bf16 (64x256)"] = (lambda: rms_norm_forward(rxb, rwb, 1e-6, 0.0, "llama", None),
                                           lambda: rms_ref(rxb, rwb))
    ce_x, ce_t = r(32, 1024), torch.randint(0, 1024, (32,), generator=g).to(D)
    cases["liger cross-entropy fwd (32x1024)"] = (
        lambda: cross_entropy_forward(ce_x.clone(), ce_t, None, -100, 0.0, 0.0, "mean", None, False),
        lambda: torch.nn.functional.cross_entropy(ce_x, ce_t))
    sa, sb = r(64, 512), r(64, 512)
    cases["liger swiglu fwd (64x512)"] = (lambda: swiglu_forward(sa, sb),
                                         lambda: torch.nn.functional.silu(sa) * sb)
    q, k = r(2, 8, 32, 64), r(2, 4, 32, 64)
    emb = torch.cat([torch.outer(torch.arange(32.0), 1.0 / (10000 ** (torch.arange(0, 64, 2) / 64)))] * 2, -1)
    cos, sin = emb.cos()[None].to(D), emb.sin()[None].to(D)

    def rope_ref() -> Any:
        def rot(t: torch.Tensor) -> torch.Tensor:
            return torch.cat((-t[..., 32:], t[..., :32]), -1)

        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * c + rot(q) * sn, k * c + rot(k) * sn

    cases["liger rope fwd (2x8x32x64)"] = (lambda: rope_forward(q.clone(), k.clone(), cos, sin), rope_ref)

    from fla.ops.simple_gla import chunk_simple_gla
    from fla.ops.utils.cumsum import chunk_local_cumsum

    cg = r(2, 256, 4)
    cases["fla chunk_local_cumsum (2x256x4, chunk 64)"] = (
        lambda: chunk_local_cumsum(cg, chunk_size=64),
        lambda: torch.cat([cg[:, i:i + 64].cumsum(1) for i in range(0, 256, 64)], 1))
    gq, gk, gv = r(1, 128, 2, 32), r(1, 128, 2, 32), r(1, 128, 2, 32)
    gg = -torch.rand(1, 128, 2, generator=g).to(D) * 0.5

    def gla_ref() -> Any:
        S = torch.zeros(1, 2, 32, 32, device=D)
        outs = []
        for t in range(128):
            S = S * gg[:, t].exp()[..., None, None] + gk[:, t, :, :, None] * gv[:, t, :, None, :]
            outs.append(torch.einsum("bhk,bhkv->bhv", gq[:, t] * 32 ** -0.5, S))
        return torch.stack(outs, 1)

    cases["fla chunk_simple_gla fwd (1x128x2x32)"] = (
        lambda: chunk_simple_gla(gq, gk, gv, g=gg, scale=32 ** -0.5), gla_ref)

    from nanovllm.layers.attention import store_kvcache

    def kv(cache_mib: int, n: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
        heads, hd, block = 8, 128, 256
        per_slot = heads * hd * 2  # bf16 bytes of one token's key (or value)
        slots = cache_mib * 2**20 // 2 // per_slot  # k and v caches: half the bytes each
        kc = torch.zeros(slots // block, block, heads, hd, dtype=torch.bfloat16, device=D)
        vc = torch.zeros_like(kc)
        key, val = r(n, heads, hd, dtype=torch.bfloat16), r(n, heads, hd, dtype=torch.bfloat16)
        slot = torch.randperm(slots, generator=g)[:n].to(D)
        return (lambda: store_kvcache(key, val, kc, vc, slot),
                lambda: (kc.view(-1, heads, hd).index_copy_(0, slot, key),
                         vc.view(-1, heads, hd).index_copy_(0, slot, val)))

    cases["nano-vllm store_kvcache (8 tokens, 1 MiB cache)"] = kv(1, 8)
    big = kv(128, 8)
    cases["nano-vllm store_kvcache (8 tokens, 128 MiB cache)"] = big

    def best(fn: Callable[[], Any]) -> float:
        fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return min(times)

    def stock(k: Any, bound: dict, grid: tuple) -> None:
        interpreter.execute(k, (), bound, grid, None, copy=True)
        return None

    rows = []
    for name, (route_fn, torch_fn) in cases.items():
        t_torch = best(torch_fn)
        t_route = best(route_fn)
        # the route's own executors run first (first added, first tried): stock alone stands in for them
        remove_executor("batched")
        add_executor("stock", stock)
        try:
            t_stock = best(route_fn)
        finally:
            remove_executor("stock")
            add_executor("batched", route_batched)
        rows.append([name, t_route, t_torch, t_stock])
        print(f"{name:50s} route {t_route * 1e3:9.2f} ms  torch {t_torch * 1e3:8.3f} ms  stock {t_stock * 1e3:9.2f} ms",
              file=sys.stderr)
    print(json.dumps(rows))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.reps)
        return 0
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--config",
           str(REPO / "examples" / "nano_vllm" / "cudashim.toml"), __file__, "--child", "--reps", str(a.reps)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    sys.stderr.write(proc.stderr[-6000:])
    if proc.returncode != 0:
        return proc.returncode
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    sys.path.insert(0, str(REPO / "benchmarks"))
    from _results import record

    table_rows = [[n, round(t_route * 1e3, 3), round(t_torch * 1e3, 4), round(t_stock * 1e3, 3),
                   round(t_route / t_torch, 1), round(t_route / t_stock, 3)] for n, t_route, t_torch, t_stock in rows]
    kv = {n: (tr, ts) for n, tr, _, ts in rows if "128 MiB" in n}
    (tr, ts), = kv.values()
    figures = {
        "route_over_torch_geomean": round(_geomean([r[4] for r in table_rows]), 1),
        "route_over_torch_max": max(r[4] for r in table_rows),
        "route_over_stock_geomean": round(_geomean([r[5] for r in table_rows]), 3),
        "kv_store_128mib_in_place_ms": round(tr * 1e3, 2),
        "kv_store_128mib_with_copy_ms": round(ts * 1e3, 2),
        "kv_store_128mib_copy_over_in_place": round(ts / tr, 1),
    }
    record("triton", figures, table={
        "columns": ["kernel", "route ms", "torch ms", "stock interpreter ms", "route / torch", "route / stock"],
        "rows": table_rows},
        goal="correct results at any speed; the in-place launch never slower than the stock interpreter's copy",
        note="route: Triton's interpreter on the device's memory in place; stock: Triton's GridExecutor, copying "
             "each argument's storage to the host and back (gap fixes on, so both compute); minimum of the reps, "
             "one thread")
    return 0


def _geomean(xs: list[float]) -> float:
    import math

    return math.exp(sum(math.log(max(x, 1e-12)) for x in xs) / len(xs))


if __name__ == "__main__":
    raise SystemExit(main())
