"""Cost of the migration report, on examples/serve.py's decode loop, against baselines from the same run.

One fresh interpreter switches between four ways of running the same loop, round after round
(activate()/deactivate() in-process, so every kind sees the same machine load; minimum per kind):

  bare       no shim: serve.generate(..., device="cpu", cuda_apis=False), the loop written for a CPU
  noreport   shim on cpu with the alias helper's report hook (installers/_common._report_wrap) made the
             identity, so it binds plain functions: the shim as it would be without the reporting code;
             the CUDA-written loop
  off        shim on cpu, report code present, CUDASHIM_REPORT unset (the default)
  on         shim on cpu, CUDASHIM_REPORT set: every aliased call the program makes is counted

Printed: the shim-vs-bare ratio with and without the reporting code (goal: equal within noise — with the
report off the bound objects are the plain functions, which the run also checks), and the cost of
turning the report on: ratio on/off, counted calls per generate(), and the price of one counted call
measured on its own (timeit, in this process).

    python benchmarks/bench_report.py [--rounds 7] [--tokens 48] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("bare", "noreport", "off", "on")

CHILD = r"""
import copy, json, os, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{repo!r}, {examples!r}]
rounds, tokens, reps, report_path = {rounds}, {tokens}, {reps}, {report!r}
import cudashim
from cudashim import report

cudashim.activate("cpu")  # serve imports flash_attn: the import hook serves the portable implementation
import torch
torch.set_num_threads(1)
import serve
cudashim.deactivate()

cfg = serve.Config(max_len=16 + tokens)
model = serve.build_model(cfg, "cpu", torch.float32, compile_layer=False)
prompts = torch.randint(0, cfg.vocab_size, (4, 16), generator=torch.Generator().manual_seed(0))


def placed(device):
    # the emulated `cuda` is a device of its own: the model goes there as a CUDA program's would
    return model if device == "cpu" else copy.deepcopy(model).to(device)


def timed(device, cuda_apis):
    m = placed(device)
    serve.generate(m, prompts, 4, device, cuda_apis=cuda_apis)  # warm-up
    best = None
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        serve.generate(m, prompts, tokens, device, cuda_apis=cuda_apis)
        dt = time.perf_counter_ns() - t0
        best = dt if best is None else min(best, dt)
    return best


def wrappers():
    import torch.distributed
    spaces = (torch, torch.cuda, torch.Tensor, torch.nn.Module, torch.distributed, torch.cuda.memory)
    # in __dict__, not hasattr: torch.ops-style namespaces answer any attribute
    return sum(1 for ns in spaces for v in list(vars(ns).values())
               if "__cudashim_report__" in (getattr(v, "__dict__", None) or {{}}))


def run(kind):
    if kind == "bare":
        return timed("cpu", False), {{}}
    extra = {{}}
    hidden = None
    if kind == "noreport":
        # the one place bindings meet the report; other modules import cudashim.report for their own
        # work, so hiding the module would stop the shim, not measure it without the report
        from cudashim.installers import _common
        hidden = _common._report_wrap
        _common._report_wrap = lambda api, treatment, value, when=None: value
    if kind == "on":
        os.environ["CUDASHIM_REPORT"] = report_path
    report._reset()
    cudashim.activate("cpu")
    try:
        extra["wrappers"] = wrappers()
        ns = timed("cuda", True)
        if kind == "on":
            extra["calls"] = sum(e["calls"] for e in report.entries().values())
            # every pass through a report wrapper costs, counted or not (the shim's own calls are not
            # counted but do pass): count them once with cProfile, outside the timed runs
            import cProfile, pstats
            prof = cProfile.Profile()
            prof.runcall(serve.generate, placed("cuda"), prompts, tokens, "cuda")
            extra["passes"] = sum(st[1] for (f, _l, name), st in pstats.Stats(prof).stats.items()
                                  if f == report.__file__ and name in ("counted_call", "__call__"))
    finally:
        cudashim.deactivate()
        os.environ.pop("CUDASHIM_REPORT", None)
        report._reset()
        if hidden is not None:
            from cudashim.installers import _common
            _common._report_wrap = hidden
    return ns, extra


kinds = {kinds!r}
out = {{k: [] for k in kinds}}
extras = {{k: [] for k in kinds}}
for r in range(rounds):
    for kind in (kinds if r % 2 == 0 else kinds[::-1]):  # alternate the order against drift
        ns, extra = run(kind)
        out[kind].append(ns)
        extras[kind].append(extra)
print("RESULT " + json.dumps({{"ns": out, "extra": extras}}))
"""


def _child(rounds: int, tokens: int, reps: int, report: str) -> dict:
    code = CHILD.format(repo=str(REPO), examples=str(REPO / "examples"), rounds=rounds, tokens=tokens, reps=reps,
                        report=report, kinds=KINDS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env.pop("PYTHONPATH", None)
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench_report: child failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _per_call_ns(number: int = 200_000) -> tuple[float, float]:
    """(plain call, counted call) in ns: the price of one wrapped call, nothing else running through it."""
    sys.path.insert(0, str(REPO))
    os.environ["CUDASHIM_REPORT"] = os.path.join(tempfile.gettempdir(), "bench_report_unused.json")
    from cudashim import report

    def f(x: int = 0) -> int:
        return x

    counted = report.wrap("bench.f", "aliased", f)
    report._enabled = False  # nothing to write at exit
    plain_t = min(timeit.repeat(f, number=number, repeat=7)) / number * 1e9
    counted_t = min(timeit.repeat(counted, number=number, repeat=7)) / number * 1e9
    return plain_t, counted_t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="rounds; each runs every kind once, order alternating")
    ap.add_argument("--tokens", type=int, default=48, help="decode steps per timed generate()")
    ap.add_argument("--reps", type=int, default=3, help="timed generate() calls per kind per round")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        res = _child(args.rounds, args.tokens, args.reps, os.path.join(tmp, "r.json"))
    ms = {k: min(v) / 1e6 for k, v in res["ns"].items()}
    calls = min(x["calls"] for x in res["extra"]["on"]) / (args.reps + 1)  # warm-up counted too: estimate
    passes = min(x["passes"] for x in res["extra"]["on"])
    print(f"bench_report: serve decode loop, {args.tokens} tokens x batch 4, {args.rounds} interleaved rounds, "
          f"min of {args.rounds * args.reps} generate() per kind")
    for k in KINDS:
        print(f"  {k:<9} {ms[k]:9.2f} ms per generate()")
    with_code, without = ms["off"] / ms["bare"], ms["noreport"] / ms["bare"]
    print(f"  shim/bare, reporting code present, report off: {with_code:.3f}")
    print(f"  shim/bare, reporting code absent             : {without:.3f}")
    print(f"  -> ratio of the two                          : {with_code / without:.3f} (goal 1.00 within noise)")
    wrappers = {k: max(x.get("wrappers", 0) for x in res["extra"][k]) for k in ("noreport", "off", "on")}
    print(f"  report wrappers bound on torch, torch.cuda, Tensor, Module, distributed: noreport {wrappers['noreport']}, off {wrappers['off']}, "
          f"on {wrappers['on']} (off == noreport: the same plain functions on the call path)")
    plain_t, counted_t = _per_call_ns()
    extra_ms = (counted_t - plain_t) * passes / 1e6
    print(f"  turning it on, measured end to end: on/off = {ms['on'] / ms['off']:.3f}")
    print(f"  turning it on, from its parts: ~{calls:.0f} counted calls and {passes} wrapper passes per generate(); "
          f"one pass {counted_t:.0f} ns vs {plain_t:.0f} ns plain (+{counted_t - plain_t:.0f} ns) "
          f"= {extra_ms:.2f} ms per generate(), {extra_ms / ms['off'] * 100:.1f}% of it")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _results

    _results.record("report", {"shim/bare with the report code present, off / with it absent": round(with_code / without, 3),
                               "report on / off": round(ms["on"] / ms["off"], 3)},
                    goal="off costs nothing (1.00 within noise)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
