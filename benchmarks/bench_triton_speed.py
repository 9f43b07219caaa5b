"""Triton kernels on the host: the batched execution against the exact interpreter and the torch equivalent.

Per kernel of the corpus, in one run: the torch operations that compute the same thing, Triton's exact
interpreter (one program instance after another), and `cudashim.triton_route.batched` (all instances at
once, the interpreter where it cannot). The outputs of the two Triton executions are compared bit for
bit; the execution each launch got, and why, is recorded. Goal: median of batched / torch <= 10 over the
corpus, no kernel slower than the interpreter.

    python benchmarks/bench_triton_speed.py [--reps 5] [--only NAME,...]

Results: benchmarks/results/triton_speed.json.
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
sys.path[:0] = [str(REPO), str(REPO / "tests" / "triton_route")]

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
    "interpreter" (the route's exact interpreter: Triton's, in place) or "batched" (tried first)."""
    from cudashim.triton_route import batched, launch

    saved = list(launch._executors)
    launch._executors.clear()
    if mode == "batched":
        launch.add_executor("batched", batched.execute)
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
    import batched_kernels as K

    def add_setup() -> dict[str, Any]:
        n = 98432
        return {"x": torch.randn(n, generator=_g(0)).to(DEV), "y": torch.randn(n, generator=_g(1)).to(DEV), "n": n}

    def add_tr(s: dict[str, Any]) -> Any:
        out = torch.empty_like(s["x"])
        K.add_kernel[(triton_cdiv(s["n"], 1024),)](s["x"], s["y"], out, s["n"], BLOCK_SIZE=1024)
        return out

    def softmax_setup() -> dict[str, Any]:
        return {"x": torch.randn(512, 781, generator=_g(2)).to(DEV)}

    def softmax_tr(s: dict[str, Any]) -> Any:
        x = s["x"]
        out = torch.empty_like(x)
        K.softmax_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[0], x.shape[1], BLOCK_SIZE=1024)
        return out

    def ln_setup() -> dict[str, Any]:
        return {"x": torch.randn(256, 1024, generator=_g(3)).to(DEV), "w": torch.randn(1024, generator=_g(4)).to(DEV),
                "b": torch.randn(1024, generator=_g(5)).to(DEV)}

    def ln_tr(s: dict[str, Any]) -> Any:
        x = s["x"]
        y = torch.empty_like(x)
        mean, rstd = torch.empty(x.shape[0], device=DEV), torch.empty(x.shape[0], device=DEV)
        K.layer_norm_kernel[(x.shape[0],)](x, y, s["w"], s["b"], mean, rstd, x.stride(0), x.shape[1], 1e-5,
                                           BLOCK_SIZE=1024)
        return y, mean, rstd

    def mm_setup() -> dict[str, Any]:
        return {"a": torch.randn(256, 256, generator=_g(6)).half().to(DEV),
                "b": torch.randn(256, 256, generator=_g(7)).half().to(DEV)}

    def mm_tr(s: dict[str, Any]) -> Any:
        a, b = s["a"], s["b"]
        M, K_ = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, dtype=torch.float16, device=DEV)
        grid = (triton_cdiv(M, 64) * triton_cdiv(N, 64),)
        K.matmul_kernel[grid](a, b, c, M, N, K_, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                              c.stride(1), BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8,
                              ACTIVATION="leaky_relu")
        return c

    def mm_torch(s: dict[str, Any]) -> Any:
        c = s["a"].float() @ s["b"].float()
        return torch.nn.functional.leaky_relu(c, 0.01).half()

    return [
        Case("vector_add", "tutorial-style (tests/triton_route/batched_kernels.py)", add_setup,
             lambda s: s["x"] + s["y"], add_tr),
        Case("fused_softmax", "tutorial-style", softmax_setup, lambda s: torch.softmax(s["x"], -1), softmax_tr),
        Case("layer_norm_fwd", "tutorial-style", ln_setup,
             lambda s: torch.nn.functional.layer_norm(s["x"], (1024,), s["w"], s["b"], 1e-5), ln_tr),
        Case("matmul_fp16_leaky_relu", "tutorial-style", mm_setup, mm_torch, mm_tr),
    ]


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _nano_vllm() -> list[Case]:
    if "flash_attn" not in sys.modules:  # nano-vllm imports it at module level; the store kernel needs none of it
        stub = types.ModuleType("flash_attn")
        stub.flash_attn_varlen_func = stub.flash_attn_with_kvcache = None  # type: ignore[attr-defined]
        sys.modules["flash_attn"] = stub
    from nanovllm.layers.attention import store_kvcache

    def setup() -> dict[str, Any]:
        n, heads, dim, blocks, block_size = 256, 8, 128, 256, 16
        slots = blocks * block_size
        return {"k": torch.randn(n, heads, dim, generator=_g(8)).to(DEV),
                "v": torch.randn(n, heads, dim, generator=_g(9)).to(DEV),
                "kc": torch.zeros(blocks, block_size, heads, dim, device=DEV),
                "vc": torch.zeros(blocks, block_size, heads, dim, device=DEV),
                "slots": torch.randperm(slots, generator=_g(10))[:n].to(torch.int32).to(DEV)}

    def tr(s: dict[str, Any]) -> Any:  # in place, as in a decode step (storing the same rows again)
        kc, vc = s["kc"], s["vc"]
        store_kvcache(s["k"], s["v"], kc, vc, s["slots"])
        return kc, vc

    def th(s: dict[str, Any]) -> Any:
        kc, vc = s["kc"], s["vc"]
        kc.view(-1, *kc.shape[2:])[s["slots"].long()] = s["k"]
        vc.view(-1, *vc.shape[2:])[s["slots"].long()] = s["v"]
        return kc, vc

    return [Case("nanovllm_store_kvcache", "nano-vllm-fork==20260210", setup, th, tr)]


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
        Case("liger_cross_entropy_fwd", "liger_kernel==0.8.5", ce_setup, ce_torch, ce_tr),
        Case("liger_rope_fwd", "liger_kernel==0.8.5", rope_setup, rope_torch, rope_tr),
    ]


def _fla() -> list[Case]:
    from fla.ops.common.chunk_h import chunk_fwd_h
    from fla.ops.utils.cumsum import chunk_local_cumsum

    def cs_setup() -> dict[str, Any]:
        return {"g": torch.randn(2, 1024, 4, generator=_g(19)).to(DEV)}

    def cs_torch(s: dict[str, Any]) -> Any:
        g = s["g"]
        b, t, h = g.shape
        return g.view(b, t // 64, 64, h).cumsum(2).view(b, t, h)

    def h_setup() -> dict[str, Any]:
        return {"k": (torch.randn(1, 512, 2, 64, generator=_g(20)) * 0.1).to(DEV),
                "v": (torch.randn(1, 512, 2, 64, generator=_g(21)) * 0.1).to(DEV)}

    def h_torch(s: dict[str, Any]) -> Any:
        k, v = s["k"], s["v"]
        b, t, h, dk = k.shape
        nt = t // 64
        kc = k.view(b, nt, 64, h, dk).permute(0, 1, 3, 4, 2)  # b nt h dk c
        vc = v.view(b, nt, 64, h, v.shape[-1]).permute(0, 1, 3, 2, 4)  # b nt h c dv
        upd = kc @ vc
        states = torch.cumsum(upd, 1) - upd  # the state before each chunk
        return states

    def h_tr(s: dict[str, Any]) -> Any:
        out = chunk_fwd_h(s["k"], s["v"], chunk_size=64)
        return out[0] if isinstance(out, tuple) else out

    return [
        Case("fla_chunk_local_cumsum", "flash-linear-attention==0.5.2", cs_setup, cs_torch,
             lambda s: chunk_local_cumsum(s["g"], 64)),
        Case("fla_chunk_fwd_h", "flash-linear-attention==0.5.2", h_setup, h_torch, h_tr),
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


def _time(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:  # noqa: D103
    out = fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


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
    reset_paths()
    with execution("batched"):
        t_batched, out_batched = _time(lambda: case.triton_fn(s), reps)
    execs = paths()
    routes = sorted({p for ps in execs.values() for p in ps})
    row.update({
        "interpreter_s": t_interp, "batched_s": t_batched,
        "interpreter_over_torch": t_interp / t_torch, "batched_over_torch": t_batched / t_torch,
        "batched_over_interpreter": t_batched / t_interp,
        "equal_to_interpreter": _equal(out_interp, out_batched),
        "execution": execs,
    })
    row["route"] = "; ".join(routes)
    return row


EXAMPLE = REPO / "examples" / "nano_vllm"


def _nano_vllm_config(tmp: Path) -> Path:
    """The example's patch map without its cpu KV-store line: nano-vllm's own Triton kernel runs."""
    text = (EXAMPLE / "cudashim.toml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith('"nanovllm.layers.attention:store_kvcache"')]
    out = tmp / "triton.toml"
    out.write_text("\n".join(lines) + "\n")
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
        configs = {"patch_map": EXAMPLE / "cudashim.toml", "triton": _nano_vllm_config(tmp)}
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
        raise SystemExit(subprocess.call([sys.executable, "-m", "cudashim", "run", "--platform", "cpu",
                                          str(Path(__file__).resolve()), *sys.argv[1:]]))
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
        "all_equal_to_interpreter": all(r["equal_to_interpreter"] for r in ok),
    }
    print(f"median batched/torch {median}  median interpreter/torch {median_interp}  "
          f"worst batched/interpreter {figures['worst_batched_over_interpreter']}")
    if not a.no_record:
        cols = ["kernel", "source", "torch_s", "interpreter_s", "batched_s", "interpreter_over_torch",
                "batched_over_torch", "batched_over_interpreter", "equal_to_interpreter", "route", "error"]
        path = record("triton_speed", figures, goal="median batched/torch <= 10; no kernel slower than the "
                      "interpreter; every output equal to the interpreter's",
                      table={"columns": cols, "rows": [[r.get(c) for c in cols] for r in rows]})
        print(path)


if __name__ == "__main__":
    main()
