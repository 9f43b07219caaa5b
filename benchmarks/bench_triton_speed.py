"""Triton kernels on the host: the batched execution against the exact interpreter and the torch equivalent.

Per kernel of the corpus, in one run on the emulated device (the script re-runs itself under
`cudashim run --platform cpu`): the torch operations that compute the same thing; Triton's stock
interpreter (its GridExecutor, copying each argument's storage to the host and back; the route's gap
fixes on, so that it computes); the route's exact interpreter (the same, in place); and
`cudashim.triton_route.batched` (all instances at once, the exact interpreter where it declines). The outputs of the two Triton executions are compared bit for
bit; the execution each launch got, and why, is recorded. Goal: median of batched / torch <= 10 over the
corpus, no kernel slower than the interpreter.

    python benchmarks/bench_triton_speed.py [--reps 5] [--only NAME,...]

Times are this process's CPU time, the minimum over the repetitions (one thread for torch and for numpy's
BLAS too, OPENBLAS_NUM_THREADS=1 unless set): the host is
shared, and wall-clock time counts other programs' turns on its cores into whichever side was running. Results:
benchmarks/results/triton_speed.json (and triton_speed_nano_vllm.json for --nano-vllm).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import torch  # noqa: E402

from benchmarks._results import record  # noqa: E402


@dataclass
class Case:
    name: str
    source: str
    setup: Callable[[], dict[str, Any]]
    torch_fn: Callable[[dict[str, Any]], Any]
    triton_fn: Callable[[dict[str, Any]], Any]


# -- routing launches to one execution -----------------------------------------------------------------

DEV = "cuda"  # the emulated device: the script runs under `cudashim run --platform cpu`


@contextlib.contextmanager
def execution(mode: str) -> Iterator[None]:
    """Every `kernel[grid](...)` inside goes through the Triton route with only the given execution:
    "stock" (Triton's GridExecutor, copying storages, with the route's gap fixes so that it computes),
    "interpreter" (the route's exact interpreter: Triton's, in place) or "batched" (tried first)."""
    from cudashim.triton_route import batched, launch

    saved = list(launch._executors)
    launch._executors.clear()
    if mode == "batched":
        launch.add_executor("batched", batched.execute)
    elif mode == "stock":  # Triton's own GridExecutor: each argument's storage copied to the host and back
        from cudashim.triton_route import interpreter

        def stock(kernel: Any, bound: dict[str, Any], grid: tuple[int, int, int]) -> None:
            interpreter.execute(kernel, (), bound, grid, None, copy=True)

        launch.add_executor("stock", stock)
    try:
        yield
    finally:
        launch._executors[:] = saved


def paths() -> dict[str, dict[str, int]]:
    from cudashim.triton_route import launch

    return {s["kernel"].rpartition(":")[2]: dict(s["paths"]) for s in launch.stats()}


def reset_paths() -> None:
    from cudashim.triton_route import launch

    launch.reset()


# -- the corpus -----------------------------------------------------------------------------------------


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tutorials() -> list[Case]:
    # the patterns of Triton's tutorials, as pinned libraries ship them (tests/triton_route/test_corpus.py)
    from fla.modules.causal_conv1d.backends.triton_ascend import _launch_add
    from fla.ops.utils.matmul import matmul
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    from trinix.kernels.layernorm_kernel import TritonLayerNormFunction

    def r(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=_g(seed)).to(dtype).to(DEV)

    def add_setup() -> dict[str, Any]:
        return {"x": r(98432, seed=0), "y": r(98432, seed=1)}

    def ln_setup() -> dict[str, Any]:
        x = r(256, 1024, seed=3).requires_grad_()
        return {"x": x, "w": r(1024, seed=4).requires_grad_(), "b": r(1024, seed=5).requires_grad_(),
                "dy": r(256, 1024, seed=22)}

    def ln_bwd_tr(s: dict[str, Any]) -> Any:
        x, w, b = (t.detach().clone().requires_grad_() for t in (s["x"], s["w"], s["b"]))
        TritonLayerNormFunction.apply(x, w, b, 1e-5).backward(s["dy"])
        return x.grad, w.grad, b.grad

    def ln_bwd_torch(s: dict[str, Any]) -> Any:
        x, w, b = (t.detach().clone().requires_grad_() for t in (s["x"], s["w"], s["b"]))
        torch.nn.functional.layer_norm(x, (1024,), w, b, 1e-5).backward(s["dy"])
        return x.grad, w.grad, b.grad

    def mm_setup() -> dict[str, Any]:
        return {"a": r(256, 256, seed=6, dtype=torch.float16), "b": r(256, 256, seed=7, dtype=torch.float16)}

    fla, liger, trinix = "fla-core==0.6.0", "liger-kernel==0.8.5", "trinix==0.1.4"
    return [
        Case("fla_vector_add", fla, add_setup, lambda s: s["x"] + s["y"], lambda s: _launch_add(s["x"], s["y"])),
        Case("liger_fused_softmax", liger, lambda: {"x": r(512, 781, seed=2)}, lambda s: torch.softmax(s["x"], -1),
             lambda s: LigerSoftmaxFunction.apply(s["x"])),
        Case("trinix_layer_norm_fwd", trinix, ln_setup,
             lambda s: torch.nn.functional.layer_norm(s["x"], (1024,), s["w"], s["b"], 1e-5),
             lambda s: TritonLayerNormFunction.apply(s["x"], s["w"], s["b"], 1e-5)),
        Case("trinix_layer_norm_bwd", trinix, ln_setup, ln_bwd_torch, ln_bwd_tr),
        Case("fla_matmul_leaky_relu", fla, mm_setup,
             lambda s: torch.nn.functional.leaky_relu(s["a"] @ s["b"], 0.01),
             lambda s: matmul(s["a"], s["b"], "leaky_relu")),
    ]


def _nano_vllm() -> list[Case]:
    from nanovllm.layers.attention import store_kvcache

    def setup(n: int) -> Callable[[], dict[str, Any]]:
        def make() -> dict[str, Any]:
            heads, dim, blocks, block_size = 8, 128, 256, 16
            slots = blocks * block_size
            return {"k": torch.randn(n, heads, dim, generator=_g(8)).bfloat16().to(DEV),
                    "v": torch.randn(n, heads, dim, generator=_g(9)).bfloat16().to(DEV),
                    "kc": torch.zeros(blocks, block_size, heads, dim, dtype=torch.bfloat16, device=DEV),
                    "vc": torch.zeros(blocks, block_size, heads, dim, dtype=torch.bfloat16, device=DEV),
                    "slots": torch.randperm(slots, generator=_g(10))[:n].to(DEV)}

        return make

    def tr(s: dict[str, Any]) -> Any:  # in place, as in a decode step (storing the same rows again)
        store_kvcache(s["k"], s["v"], s["kc"], s["vc"], s["slots"])
        return s["kc"], s["vc"]

    def th(s: dict[str, Any]) -> Any:
        kc, vc = s["kc"], s["vc"]
        kc.view(-1, *kc.shape[2:]).index_copy_(0, s["slots"], s["k"])
        vc.view(-1, *vc.shape[2:]).index_copy_(0, s["slots"], s["v"])
        return kc, vc

    src = "nano-vllm-fork==20260210"
    return [Case("nanovllm_store_kvcache_decode_8", src, setup(8), th, tr),
            Case("nanovllm_store_kvcache_prefill_256", src, setup(256), th, tr)]


def _liger() -> list[Case]:
    from liger_kernel.ops.cross_entropy import cross_entropy_forward
    from liger_kernel.ops.rms_norm import rms_norm_forward
    from liger_kernel.ops.rope import rope_forward
    from liger_kernel.ops.swiglu import swiglu_forward

    def swiglu_setup() -> dict[str, Any]:
        return {"a": torch.randn(256, 1024, generator=_g(11)).to(DEV), "b": torch.randn(256, 1024, generator=_g(12)).to(DEV)}

    def rms_setup() -> dict[str, Any]:
        return {"x": torch.randn(256, 1024, generator=_g(13)).to(DEV), "w": torch.randn(1024, generator=_g(14)).to(DEV)}

    def rms_torch(s: dict[str, Any]) -> Any:
        x = s["x"]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s["w"]

    def ce_setup() -> dict[str, Any]:
        return {"x": torch.randn(128, 4096, generator=_g(15)).to(DEV),
                "t": torch.randint(0, 4096, (128,), generator=_g(16)).to(DEV)}

    def ce_tr(s: dict[str, Any]) -> Any:
        x = s["x"].clone()
        out = cross_entropy_forward(x, s["t"], None, -100, 0.0, 0.0, "mean", None, False)
        return out[0], x

    def ce_torch(s: dict[str, Any]) -> Any:
        x = s["x"]
        loss = torch.nn.functional.cross_entropy(x, s["t"])
        grad = (torch.softmax(x, -1) - torch.nn.functional.one_hot(s["t"], x.shape[1])) / x.shape[0]
        return loss, grad

    def rope_setup() -> dict[str, Any]:
        b, h, t, d = 1, 8, 256, 128
        pos = torch.arange(t, dtype=torch.float32)[:, None] * (1e4 ** (-torch.arange(0, d, 2) / d))[None]
        emb = torch.cat([pos, pos], -1)[None]
        return {"q": torch.randn(b, h, t, d, generator=_g(17)).to(DEV), "k": torch.randn(b, h, t, d, generator=_g(18)).to(DEV),
                "cos": emb.cos().to(DEV), "sin": emb.sin().to(DEV)}

    def rope_torch(s: dict[str, Any]) -> Any:
        def rot(x: torch.Tensor) -> torch.Tensor:
            x1, x2 = x.chunk(2, -1)
            return torch.cat([-x2, x1], -1)

        cos, sin = s["cos"][:, None], s["sin"][:, None]
        return s["q"] * cos + rot(s["q"]) * sin, s["k"] * cos + rot(s["k"]) * sin

    def rope_tr(s: dict[str, Any]) -> Any:
        q, k, _, _ = rope_forward(s["q"].clone(), s["k"].clone(), s["cos"], s["sin"])
        return q, k

    return [
        Case("liger_swiglu_fwd", "liger_kernel==0.8.5", swiglu_setup,
             lambda s: torch.nn.functional.silu(s["a"]) * s["b"], lambda s: swiglu_forward(s["a"], s["b"])[2]),
        Case("liger_rms_norm_fwd", "liger_kernel==0.8.5", rms_setup, rms_torch,
             lambda s: rms_norm_forward(s["x"], s["w"], 1e-6, 0.0, "llama", None)[0]),
        Case("liger_rms_norm_fwd_bf16", "liger_kernel==0.8.5",
             lambda: {k: v.bfloat16() for k, v in rms_setup().items()}, rms_torch,
             lambda s: rms_norm_forward(s["x"], s["w"], 1e-6, 0.0, "llama", None)[0]),
        Case("liger_cross_entropy_fwd", "liger_kernel==0.8.5", ce_setup, ce_torch, ce_tr),
        Case("liger_rope_fwd", "liger_kernel==0.8.5", rope_setup, rope_torch, rope_tr),
    ]


def _fla() -> list[Case]:
    from fla.ops.simple_gla import chunk_simple_gla
    from fla.ops.utils.cumsum import chunk_local_cumsum

    def cs_setup() -> dict[str, Any]:
        return {"g": torch.randn(2, 1024, 4, generator=_g(19)).to(DEV)}

    def cs_torch(s: dict[str, Any]) -> Any:
        g = s["g"]
        b, t, h = g.shape
        return g.view(b, t // 64, 64, h).cumsum(2).view(b, t, h)

    def gla_setup() -> dict[str, Any]:
        return {"q": torch.randn(1, 256, 2, 32, generator=_g(23)).to(DEV),
                "k": torch.randn(1, 256, 2, 32, generator=_g(24)).to(DEV),
                "v": torch.randn(1, 256, 2, 32, generator=_g(25)).to(DEV),
                "g": (-torch.rand(1, 256, 2, generator=_g(26)) * 0.5).to(DEV)}

    def gla_torch(s: dict[str, Any]) -> Any:  # the chunked form in torch: per 64-token chunk, state + intra-chunk
        q, k, v, g = (s[n].float() for n in "qkvg")
        b, t, h, d = q.shape
        q = q * d ** -0.5
        state = torch.zeros(b, h, d, d, device=q.device)
        outs = []
        for c in range(0, t, 64):
            qc, kc, vc, gc = q[:, c:c + 64], k[:, c:c + 64], v[:, c:c + 64], g[:, c:c + 64].cumsum(1)
            inter = torch.einsum("bthk,bhkv->bthv", qc * gc.exp()[..., None], state)
            decay = (gc[:, :, None] - gc[:, None, :]).exp().permute(0, 3, 1, 2).tril()
            att = torch.einsum("bthk,bshk->bhts", qc, kc) * decay
            outs.append(inter + torch.einsum("bhts,bshv->bthv", att, vc))
            last = gc[:, -1]
            state = state * last.exp()[..., None, None] + torch.einsum(
                "bthk,bthv->bhkv", kc * (last[:, None] - gc).exp()[..., None], vc)
        return torch.cat(outs, 1)

    src = "flash-linear-attention==0.5.2"
    return [
        Case("fla_chunk_local_cumsum", src, cs_setup, cs_torch, lambda s: chunk_local_cumsum(s["g"], 64)),
        Case("fla_chunk_simple_gla_fwd", src, gla_setup, gla_torch,
             lambda s: chunk_simple_gla(s["q"], s["k"], s["v"], g=s["g"], scale=32 ** -0.5)),
    ]


def corpus() -> list[Case]:
    cases: list[Case] = []
    for part in (_tutorials, _nano_vllm, _liger, _fla):
        cases += part()
    return cases


# -- measuring ----------------------------------------------------------------------------------------


def _flat(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return []


def _equal(a: Any, b: Any) -> bool:
    fa, fb = _flat(a), _flat(b)
    return len(fa) == len(fb) and all(x.dtype == y.dtype and x.shape == y.shape and
                                      torch.equal(x.view(-1).view(torch.uint8), y.view(-1).view(torch.uint8))
                                      for x, y in zip((t.contiguous() for t in fa), (t.contiguous() for t in fb)))


def _time(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    out = fn()
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out  # the least disturbed run: caches and memory bandwidth are shared too


def measure(case: Case, reps: int) -> dict[str, Any]:
    s = case.setup()
    row: dict[str, Any] = {"kernel": case.name, "source": case.source}
    t_torch, _ = _time(lambda: case.torch_fn(s), max(reps, 20))
    row["torch_s"] = t_torch
    try:
        with execution("interpreter"):
            t_interp, out_interp = _time(lambda: case.triton_fn(s), max(1, reps // 3))
    except Exception as e:  # noqa: BLE001 - the row says what failed
        row["error"] = f"interpreter: {type(e).__name__}: {str(e)[:300]}"
        return row
    try:
        with execution("stock"):
            t_stock, _ = _time(lambda: case.triton_fn(s), 1)
    except Exception as e:  # noqa: BLE001
        t_stock = None
        row["stock_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    row["stock_s"] = t_stock
    reset_paths()
    with execution("batched"):
        t_batched, out_batched = _time(lambda: case.triton_fn(s), reps)
    execs = paths()
    routes = sorted({p for ps in execs.values() for p in ps})
    row.update({
        "interpreter_s": t_interp, "batched_s": t_batched,
        "batched_over_stock": t_batched / t_stock if t_stock else None,
        "interpreter_over_torch": t_interp / t_torch, "batched_over_torch": t_batched / t_torch,
        "batched_over_interpreter": t_batched / t_interp,
        "equal_to_interpreter": _equal(out_interp, out_batched),
        "execution": execs,
    })
    row["route"] = "; ".join(routes)
    return row


EXAMPLE = REPO / "examples" / "nano_vllm"


def _patch_map_config(tmp: Path) -> Path:
    """The example's config with the portable KV store mapped in: the patch-map run."""
    text = (EXAMPLE / "cudashim.toml").read_text()
    out = tmp / "patch_map.toml"
    out.write_text(text + '\n[patches.cpu]\n"nanovllm.layers.attention:store_kvcache" = "adapters:store_kvcache"\n')
    return out


def nano_vllm(rounds: int, model: str | None, max_tokens: int) -> dict[str, Any]:
    """nano-vllm on the tiny model, tokens/s with the patch map's KV store against its own Triton kernel:
    runs alternate (the side going first swapped every round), the medians compared."""
    import json
    import os
    import tempfile

    env = dict(os.environ, TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        if model is None:
            model = str(tmp / "ckpt")
            subprocess.run([sys.executable, str(EXAMPLE / "build_checkpoint.py"), model], check=True, capture_output=True)
        configs = {"patch_map": _patch_map_config(tmp), "triton": EXAMPLE / "cudashim.toml"}
        tps: dict[str, list[float]] = {k: [] for k in configs}
        tokens: dict[str, Any] = {}
        report: dict[str, Any] = {}
        for r in range(rounds):
            order = list(configs) if r % 2 == 0 else list(reversed(configs))
            for side in order:
                out, rep = tmp / f"{side}.json", tmp / f"{side}-report.json"
                cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--config", str(configs[side]),
                       "--report", str(rep), str(EXAMPLE / "run.py"), model, "--max-tokens", str(max_tokens),
                       "--json", str(out)]
                p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    raise SystemExit(f"nano-vllm ({side}) failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
                res = json.loads(out.read_text())
                tps[side].append(res["tokens_per_s"])
                tokens[side] = res["token_ids"]
                if side == "triton" and rep.exists():
                    report = json.loads(rep.read_text())
                print(f"round {r} {side:9s} {res['tokens_per_s']:8.1f} tokens/s", flush=True)
    med = {k: statistics.median(v) for k, v in tps.items()}
    kernels = _find_triton_section(report)
    return {"tokens_per_s": tps, "median_tokens_per_s": med,
            "patch_map_over_triton": med["patch_map"] / med["triton"],
            "same_tokens": tokens.get("patch_map") == tokens.get("triton"), "triton_kernels": kernels}


def _find_triton_section(report: Any) -> Any:
    if isinstance(report, dict):
        for k, v in report.items():
            if k == "triton_kernels":
                return v
            found = _find_triton_section(v)
            if found is not None:
                return found
    elif isinstance(report, list):
        for v in report:
            found = _find_triton_section(v)
            if found is not None:
                return found
    return None


def main() -> None:
    if "--nano-vllm" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--nano-vllm", type=int, metavar="ROUNDS", required=True)
        ap.add_argument("--model", default=None)
        ap.add_argument("--max-tokens", type=int, default=32)
        ap.add_argument("--no-record", action="store_true")
        a = ap.parse_args()
        res = nano_vllm(a.nano_vllm, a.model, a.max_tokens)
        print(json.dumps({k: v for k, v in res.items() if k != "triton_kernels"}, indent=1))
        print("triton kernels:", json.dumps(res["triton_kernels"], indent=1)[:3000])
        if not a.no_record:
            print(record("triton_speed_nano_vllm", {"patch_map_over_triton": res["patch_map_over_triton"],
                                                    "median_tokens_per_s": res["median_tokens_per_s"],
                                                    "same_tokens": res["same_tokens"]},
                         goal="patch-map tokens/s / Triton-kernel tokens/s <= 1.5 (same run, alternating)",
                         note=json.dumps({"tokens_per_s": res["tokens_per_s"],
                                          "triton_kernels": res["triton_kernels"]})))
        return
    from cudashim import triton_route

    if triton_route.installed() != "cpu":  # the Triton route exists under the shim: run there
        import os

        # numpy's BLAS (the interpreters' tl.dot) on one thread, as torch: its idle threads spin, and on a
        # shared host that CPU time is contention, not work
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        raise SystemExit(subprocess.call([sys.executable, "-m", "cudashim", "run", "--platform", "cpu",
                                          str(Path(__file__).resolve()), *sys.argv[1:]], env=env))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (the interpreter and the batched execution use one core)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rows = []
    for case in corpus():
        if a.only and case.name not in a.only.split(","):
            continue
        row = measure(case, a.reps)
        rows.append(row)
        if "error" in row:
            print(f"{case.name:28s} ERROR {row['error']}", flush=True)
        else:
            print(f"{case.name:28s} torch {row['torch_s'] * 1e3:9.3f} ms  interp {row['interpreter_s'] * 1e3:9.1f} ms "
                  f"({row['interpreter_over_torch']:8.0f}x)  batched {row['batched_s'] * 1e3:8.2f} ms "
                  f"({row['batched_over_torch']:7.1f}x)  equal={row['equal_to_interpreter']}  {row['route']}",
                  flush=True)
    ok = [r for r in rows if "error" not in r]
    median = statistics.median(r["batched_over_torch"] for r in ok) if ok else None
    median_interp = statistics.median(r["interpreter_over_torch"] for r in ok) if ok else None
    figures = {
        "kernels": len(rows), "measured": len(ok),
        "median_batched_over_torch": median, "median_interpreter_over_torch": median_interp,
        "worst_batched_over_interpreter": max((r["batched_over_interpreter"] for r in ok), default=None),
        "worst_batched_over_stock": max((r["batched_over_stock"] for r in ok if r.get("batched_over_stock")),
                                        default=None),
        "all_equal_to_interpreter": all(r["equal_to_interpreter"] for r in ok),
    }
    print(f"median batched/torch {median}  median interpreter/torch {median_interp}  "
          f"worst batched/interpreter {figures['worst_batched_over_interpreter']}")
    if not a.no_record:
        cols = ["kernel", "source", "torch_s", "stock_s", "interpreter_s", "batched_s", "interpreter_over_torch",
                "batched_over_torch", "batched_over_stock", "batched_over_interpreter", "equal_to_interpreter", "route",
                "error"]
        path = record("triton_speed", figures, goal="median batched/torch <= 10; no kernel slower than the "
                      "interpreter; every output equal to the interpreter's",
                      note="times: this process's CPU time (time.process_time), minimum over the repetitions",
                      table={"columns": cols, "rows": [[r.get(c) for c in cols] for r in rows]})
        print(path)


if __name__ == "__main__":
    main()
