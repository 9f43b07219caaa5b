"""Cost of the migration report, on examples/serve.py's decode loop, against baselines from the same run.

Four kinds of fresh interpreter, interleaved round by round (median per kind):

  bare       no shim: serve.generate(..., device="cpu", cuda_apis=False), the loop written for a CPU
             (flash_attn_varlen_func is the shim's portable implementation, imported directly)
  noreport   shim on cpu with the reporting code absent (cudashim.report cannot be imported, so the
             alias helper binds plain functions): the CUDA-written loop, device="cuda"
  off        shim on cpu, report code present, CUDASHIM_REPORT unset (the default)
  on         shim on cpu, CUDASHIM_REPORT set: every aliased call is counted

Printed: the shim-vs-bare ratio with and without the reporting code (goal: equal within noise, since
with the report off the bound objects are the plain functions), the structural check behind it (no
report wrapper on any torch.cuda attribute when off), and the cost of turning the report on
(ratio on/off, and nanoseconds per counted call).

    python benchmarks/bench_report.py [--rounds 3] [--tokens 48] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("bare", "noreport", "off", "on")

CHILD = r"""
import json, os, sys, time, types, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{repo!r}, {examples!r}]
mode, tokens, reps = {mode!r}, {tokens}, {reps}
if mode == "noreport":
    sys.modules["cudashim.report"] = None  # the reporting code is not there
if mode == "on":
    os.environ["CUDASHIM_REPORT"] = {report!r}
if mode != "bare":
    import cudashim
    cudashim.activate("cpu")
import torch
torch.set_num_threads(1)
if mode == "bare":
    from cudashim.npu_ops import flash_attn as _fa
    fa = types.ModuleType("flash_attn")
    fa.flash_attn_varlen_func = _fa.flash_attn_varlen_func
    sys.modules["flash_attn"] = fa
import serve

cfg = serve.Config(max_len=16 + tokens)
device = "cpu" if mode == "bare" else "cuda"
cuda_apis = mode != "bare"
if cuda_apis:
    import torch.distributed as dist
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
model = serve.build_model(cfg, device, torch.float32, compile_layer=False)
prompts = torch.randint(0, cfg.vocab_size, (4, 16), generator=torch.Generator().manual_seed(0))
serve.generate(model, prompts, 4, device, cuda_apis=cuda_apis)  # warm-up
times = []
for _ in range(reps):
    t0 = time.perf_counter_ns()
    serve.generate(model, prompts, tokens, device, cuda_apis=cuda_apis)
    times.append(time.perf_counter_ns() - t0)
out = {{"ns": min(times)}}
if mode in ("off", "on"):
    wrapped = [n for n, v in vars(torch.cuda).items() if hasattr(v, "__cudashim_report__")]
    out["report_wrappers_on_torch_cuda"] = len(wrapped)
if mode == "on":
    from cudashim import report
    calls = sum(e["calls"] for e in report.entries().values())
    out["counted_calls"] = calls
    out["counted_per_run"] = calls  # includes warm-up and all reps; scaled below
print("RESULT " + json.dumps(out))
"""


def _child(mode: str, tokens: int, reps: int, report: str) -> dict:
    code = CHILD.format(repo=str(REPO), examples=str(REPO / "examples"), mode=mode, tokens=tokens, reps=reps,
                        report=report)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env.pop("PYTHONPATH", None)
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench_report: {mode} child failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _per_call_ns(number: int = 200_000) -> tuple[float, float]:
    """(plain call, counted call) in ns, in this process: the exact price of one wrapped call."""
    import timeit

    sys.path.insert(0, str(REPO))
    os.environ["CUDASHIM_REPORT"] = os.path.join(tempfile.gettempdir(), "bench_report_unused.json")
    from cudashim import report

    def f(x: int = 0) -> int:
        return x

    counted = report.wrap("bench.f", "aliased", f)
    report._enabled = False  # measured only: nothing to write at exit
    plain_t = min(timeit.repeat(f, number=number, repeat=5)) / number * 1e9
    counted_t = min(timeit.repeat(counted, number=number, repeat=5)) / number * 1e9
    return plain_t, counted_t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="fresh interpreters per kind, interleaved")
    ap.add_argument("--tokens", type=int, default=48, help="decode steps per timed generate()")
    ap.add_argument("--reps", type=int, default=3, help="timed generate() calls per interpreter (min taken)")
    args = ap.parse_args(argv)

    results: dict[str, list[dict]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for kind in KINDS if r % 2 == 0 else reversed(KINDS):  # alternate order against drift
                results[kind].append(_child(kind, args.tokens, args.reps, os.path.join(tmp, f"r{r}.json")))

    ms = {k: statistics.median(x["ns"] for x in v) / 1e6 for k, v in results.items()}
    runs = args.reps + 1  # warm-up (4 tokens) counted too; the per-call figure below is an estimate
    calls_per_generate = statistics.median(x["counted_calls"] for x in results["on"]) / runs
    print(f"bench_report: serve decode loop, {args.tokens} tokens x batch 4, {args.rounds} rounds, min of {args.reps}")
    for k in KINDS:
        print(f"  {k:<9} {ms[k]:9.2f} ms per generate()")
    with_code, without = ms["off"] / ms["bare"], ms["noreport"] / ms["bare"]
    print(f"  shim/bare, report code present (off): {with_code:.3f}")
    print(f"  shim/bare, report code absent       : {without:.3f}")
    print(f"  -> presence of the reporting code   : {with_code / without:.3f} (goal 1.00 within noise)")
    wrappers = max(x["report_wrappers_on_torch_cuda"] for x in results["off"])
    print(f"  report wrappers on torch.cuda when off: {wrappers} (structural: the call path is the plain function)")
    cost = ms["on"] - ms["off"]
    per_call = cost * 1e6 / calls_per_generate if calls_per_generate else float("nan")
    print(f"  turning it on: on/off = {ms['on'] / ms['off']:.3f}; ~{calls_per_generate:.0f} counted calls per "
          f"generate(), ~{per_call:.0f} ns per counted call (difference of medians; noisy when small)")
    plain_t, counted_t = _per_call_ns()
    print(f"  one counted call, in-process: {counted_t:.0f} ns vs {plain_t:.0f} ns plain "
          f"(+{counted_t - plain_t:.0f} ns; x{calls_per_generate:.0f} calls = "
          f"{(counted_t - plain_t) * calls_per_generate / 1e6:.3f} ms per generate())")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
