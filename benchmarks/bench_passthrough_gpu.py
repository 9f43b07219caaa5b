"""What the shim costs a CUDA program on an NVIDIA GPU when it has nothing to stand in for.

    python3 benchmarks/bench_passthrough_gpu.py [--rounds 6] [--repeat 30] [--out benchmarks/results/passthrough_gpu.json]

The subject is a serve loop that needs no stand-in: a small bf16 decoder (pure torch — attention by
`F.scaled_dot_product_attention` over a static KV cache, no flash_attn), greedy decode of batch x
new-tokens steps, each step a few hundred small kernel launches, so the loop is bound by host time:
whatever the shim added to a torch call would show here first. Each round starts two fresh
processes, shim off (`CUDASHIM_DISABLE=1`, this checkout off the path) and shim on (`python -m cudashim
run --platform nvidia`), in alternating order; each times --repeat generate calls after a warm-up
and reports their median tokens/s. The figure is the median over rounds of the per-round ratio
on/off (both sides ran back to back), with the spread of those ratios (min, quartiles, max) beside
it. Goal: >= 0.99.

As bench_startup.py does, the run pins itself, and so both workers, to one CPU (the last it may use;
--no-pin to not): a host-bound loop's speed otherwise depends on which core each fresh process got.
Needs a CUDA build of torch and a GPU; refuses to run without one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "passthrough_gpu.json"


def _say(msg: str) -> None:
    print(f"[bench_passthrough {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- the worker: a serve loop in plain torch -----------------------------------------------------


def _model(hidden: int, layers: int, heads: int, vocab: int, dtype, device: str):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    hd = hidden // heads

    def w(*shape):
        return (torch.randn(*shape, device=device) / shape[-1] ** 0.5).to(dtype)

    params = {"embed": w(vocab, hidden), "head": w(vocab, hidden),
              "layers": [dict(qkv=w(3 * hidden, hidden), o=w(hidden, hidden), up=w(2 * 2 * hidden, hidden),
                              down=w(hidden, 2 * hidden)) for _ in range(layers)]}

    def norm(x):
        return F.rms_norm(x, (x.shape[-1],), eps=1e-6)

    def step(ids, caches, pos: int):
        """ids (B, T) at positions pos..pos+T-1 -> logits of the last position (B, vocab)."""
        b, t = ids.shape
        x = F.embedding(ids, params["embed"])
        for layer, (kc, vc) in zip(params["layers"], caches):
            q, k, v = F.linear(norm(x), layer["qkv"]).view(b, t, 3, heads, hd).unbind(2)
            kc[:, :, pos:pos + t] = k.transpose(1, 2)
            vc[:, :, pos:pos + t] = v.transpose(1, 2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), kc[:, :, :pos + t], vc[:, :, :pos + t],
                                               is_causal=t > 1)
            x = x + F.linear(a.transpose(1, 2).reshape(b, t, hidden), layer["o"])
            gate, up = F.linear(norm(x), layer["up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        return F.linear(norm(x[:, -1]), params["head"])

    return step


def _worker(args: argparse.Namespace) -> None:
    import torch

    if not torch.cuda.is_available() or torch.version.cuda is None:
        raise SystemExit("bench_passthrough_gpu: needs a CUDA build of torch and an NVIDIA GPU")
    dev, dtype = "cuda", torch.bfloat16
    step = _model(args.hidden, args.layers, 4, args.vocab, dtype, dev)
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(0, args.vocab, (args.batch, args.prompt_len), generator=g).to(dev)
    total = args.prompt_len + args.new_tokens
    hd = args.hidden // 4

    def generate():
        caches = [(torch.empty(args.batch, 4, total, hd, device=dev, dtype=dtype),
                   torch.empty(args.batch, 4, total, hd, device=dev, dtype=dtype)) for _ in range(args.layers)]
        out = torch.empty(args.batch, args.new_tokens, dtype=torch.long, device=dev)
        with torch.inference_mode():
            logits = step(prompts, caches, 0)
            for i in range(args.new_tokens):
                nxt = logits.argmax(-1)
                out[:, i] = nxt
                logits = step(nxt[:, None], caches, args.prompt_len + i)
        return out

    first = generate()
    for _ in range(2):
        generate()
    torch.cuda.synchronize()
    tps = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        generate()
        torch.cuda.synchronize()
        tps.append(args.batch * args.new_tokens / (time.perf_counter() - t0))
    shim = sys.modules.get("cudashim")
    platform = None
    if shim is not None:
        from cudashim.platform.contract import platform_name

        platform = platform_name()
    print("TPS " + json.dumps({"tps": statistics.median(tps), "samples": tps, "cudashim_loaded": shim is not None,
                               "platform": platform, "tokens_sum": int(first.sum()),
                               "device": torch.cuda.get_device_name(),
                               "torch": torch.__version__}), flush=True)


# ---- the driver ----------------------------------------------------------------------------------


def _run(label: str, cmd: list[str], env: dict[str, str], timeout: float) -> dict:
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"bench_passthrough_gpu: shim-{label} worker exited {p.returncode}:\n{p.stderr[-3000:]}")
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("TPS ")), None)
    if line is None:
        raise SystemExit(f"bench_passthrough_gpu: shim-{label} worker printed no result:\n{p.stdout[-2000:]}")
    row = json.loads(line[4:])
    _say(f"shim-{label}: {row['tps']:.0f} tokens/s (worker {time.perf_counter() - t:.1f} s)")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6, help="paired rounds (two fresh processes each)")
    ap.add_argument("--repeat", type=int, default=30, help="timed generate calls per worker (median kept)")
    ap.add_argument("--budget-s", type=float, default=120.0, help="start no new round after this many seconds")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--no-pin", action="store_true", help="do not pin the runs to one CPU")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON result goes")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pinned = None
    if not args.no_pin and len(cpus) > 1:
        pinned = cpus[-1]
        os.sched_setaffinity(0, {pinned})  # inherited by every worker started below
        _say(f"pinned to CPU {pinned} (of {len(cpus)}); --no-pin to let the runs float")
    sizes = ["--batch", str(args.batch), "--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens),
             "--hidden", str(args.hidden), "--layers", str(args.layers), "--vocab", str(args.vocab),
             "--repeat", str(args.repeat)]
    worker = [str(Path(__file__).resolve()), "--worker", *sizes]
    scrub = ("CUDASHIM_", "PYTHONPATH")
    base = {k: v for k, v in os.environ.items() if not k.startswith(scrub)}
    # shim off: this checkout is not on the path and the shim is disabled should it be installed
    off = ([sys.executable, *worker], {**base, "CUDASHIM_DISABLE": "1"})
    # shim on: the launcher, from this checkout, whether or not cudashim is pip-installed
    on = ([sys.executable, "-m", "cudashim", "run", "--platform", "nvidia", *worker], {**base, "PYTHONPATH": str(ROOT)})
    rows: dict[str, list[dict]] = {"off": [], "on": []}
    start = time.perf_counter()
    for r in range(args.rounds):
        if r and time.perf_counter() - start > args.budget_s:
            _say(f"budget of {args.budget_s:.0f} s spent: stopping after {r} round(s)")
            break
        order = ["off", "on"] if r % 2 == 0 else ["on", "off"]
        for label in order:
            cmd, env = off if label == "off" else on
            rows[label].append(_run(label, cmd, env, timeout=300))
    if any(row["cudashim_loaded"] for row in rows["off"]):
        raise SystemExit("bench_passthrough_gpu: the shim-off worker imported cudashim")
    if not all(row["cudashim_loaded"] and row["platform"] == "nvidia" for row in rows["on"]):
        raise SystemExit("bench_passthrough_gpu: the shim-on worker ran without cudashim on the nvidia platform")
    if len({row["tokens_sum"] for row in rows["off"] + rows["on"]}) != 1:
        raise SystemExit("bench_passthrough_gpu: the two sides generated different tokens")
    ratios = [a["tps"] / b["tps"] for a, b in zip(rows["on"], rows["off"])]
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) >= 2 else [ratios[0]] * 3
    res = {
        "benchmark": "bench_passthrough_gpu",
        "what": "serve loop without stand-ins, tokens/s shim on (cudashim run --platform nvidia) / shim off",
        "device": rows["off"][0]["device"], "torch": rows["off"][0]["torch"],
        "rounds": len(ratios), "repeat": args.repeat, "pinned_cpu": pinned,
        "sizes": {"batch": args.batch, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
                  "hidden": args.hidden, "layers": args.layers, "vocab": args.vocab},
        "ratio_median": statistics.median(ratios),
        "ratio_spread": {"min": min(ratios), "q1": q[0], "q3": q[-1], "max": max(ratios)},
        "ratios": ratios,
        "off_tps": [row["tps"] for row in rows["off"]], "on_tps": [row["tps"] for row in rows["on"]],
        "goal": 0.99,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    print(f"pass-through: shim on / off = {res['ratio_median']:.3f} (median of {len(ratios)} rounds; "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}); goal >= 0.99: "
          f"{'met' if res['ratio_median'] >= 0.99 else 'NOT met'}; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
