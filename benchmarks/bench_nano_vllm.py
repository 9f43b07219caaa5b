"""nano-vllm's bench.py-style throughput under the shim on cpu (TP=1, eager), with the model size
and the share of the generate() time spent in shim code.

    python benchmarks/bench_nano_vllm.py [--seqs 16] [--model DIR] [--backend device] [--against DIR] [--rounds N]
        [--paired | --alternate]

The engine runs unmodified under `python -m cudashim run --platform cpu`. Like nano-vllm's own
bench.py it sends a batch of random-token prompts of random lengths with random output lengths
(ignore_eos). A warm-up generate() with the same shapes runs first, so torch.compile's work is not
timed. The timed generate() runs --repeat times plain (the median is the throughput figure) and once
under cProfile, whose per-function self time is split into shim machinery (cudashim/ minus the replacement
implementations: aliases, patches, dispatch, report), replacement implementations (cudashim/replacements
and cudashim/kernels: the attention and KV-store work that flash-attn and Triton do on a GPU) and
the example's patch-map adapters, against everything else. cProfile inflates Python-heavy code, the
shim's wrappers included, so the share is an upper bound of the share without the profiler.
Goal: shim share under 2 %.

--against DIR (issue 17: "nano-vllm cpu tokens/s within 5 % of today's"): the same worker also runs
on another checkout's cudashim (DIR, e.g. a `git worktree` of a commit that still has the alias
layer), with that checkout's default cpu backend, alternating with this checkout's runs (--rounds
each); the figure is the ratio of the median tokens/s. --paired runs the two sides of a round at the
same time, each pinned to its own CPU, the CPUs swapped every round: on a host whose speed changes by
half from one second to the next, runs one after the other compare two different machines.
--alternate (the figure to trust) loads both workers, then runs them in turns on CPU 0, one engine
step a turn, the side going first swapped every step: the two sides' steps are milliseconds apart on
the same CPU, so the host's changes of speed fall on both alike (per-round ratios within about 2 %,
where whole runs at once or one after the other scatter by 20 %). A round is one generate on each side.
--backend sets CUDASHIM_CPU_BACKEND for this checkout's runs, which only a checkout from before the
device became the one cpu path reads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "nano_vllm"
ADAPTERS = str(EXAMPLE / "adapters.py")


def _worker(args: argparse.Namespace) -> None:
    import cProfile
    import pstats
    import random
    import time

    import torch

    import cudashim
    from nanovllm import LLM, SamplingParams

    shim_root = Path(cudashim.__file__).resolve().parent  # this checkout's or --against's
    shim_dir, replacements = str(shim_root), (str(shim_root / "replacements"), str(shim_root / "kernels"))

    llm = LLM(args.model, enforce_eager=True, tensor_parallel_size=1, max_model_len=512,
              max_num_batched_tokens=4096, max_num_seqs=args.seqs, gpu_memory_utilization=0.05)
    rng = random.Random(0)
    vocab = llm.tokenizer.vocab_size
    prompts = [[rng.randint(0, vocab - 1) for _ in range(rng.randint(32, 200))] for _ in range(args.seqs)]
    params = [SamplingParams(temperature=0.6, ignore_eos=True, max_tokens=rng.randint(32, 96)) for _ in range(args.seqs)]
    llm.generate(prompts, params, use_tqdm=False)  # warm-up: compiles every shape the timed runs see

    times = []
    if args.turns is not None:  # --alternate: one timed engine step per "go" from the parent, on its CPU
        os.sched_setaffinity(0, {args.turns})
        print("ready", flush=True)
        busy = 0.0
        for line in sys.stdin:
            if line.strip() != "go":
                break
            if llm.is_finished():  # a new generate(): the same requests as generate() adds
                for prompt, sp in zip(prompts, params):
                    llm.add_request(prompt, sp)
            t = time.perf_counter()
            llm.step()
            busy += time.perf_counter() - t
            print(f"{'turn' if llm.is_finished() else 'step'} {busy}", flush=True)
            if llm.is_finished():
                times.append(busy)
                busy = 0.0
    else:
        # the median of --repeat timed generates: one generate is about a second, and this host's speed
        # changes by half from one second to the next
        for _ in range(args.repeat):
            t = time.perf_counter()
            llm.generate(prompts, params, use_tqdm=False)
            times.append(time.perf_counter() - t)
    dt = sorted(times)[len(times) // 2]
    tokens = sum(p.max_tokens for p in params)

    prof = cProfile.Profile()
    prof.enable()
    llm.generate(prompts, params, use_tqdm=False)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, func) -> (cc, nc, tottime, cumtime, callers)
    total = sum(v[2] for v in stats.values())
    repl = sum(v[2] for k, v in stats.items() if k[0].startswith(replacements))
    shim = sum(v[2] for k, v in stats.items() if k[0].startswith(shim_dir)) - repl
    adapters = sum(v[2] for k, v in stats.items() if k[0] == ADAPTERS)
    top = sorted(((v[2], f"{Path(k[0]).name}:{k[1]}:{k[2]}") for k, v in stats.items() if k[0].startswith(shim_dir) and not k[0].startswith(replacements)), reverse=True)[:5]

    params_n = sum(p.numel() for p in llm.model_runner.model.parameters())
    print(json.dumps({"shim": shim_dir, "backend": os.environ.get("CUDASHIM_CPU_BACKEND", "(default)"),
                      # the device's tensors say device.type "cuda"; the alias layer's say "cpu" (is_cuda lies there)
                      "device_tensors": next(llm.model_runner.model.parameters()).device.type == "cuda",
                      "model_params": params_n, "seqs": args.seqs, "tokens": tokens, "seconds": dt,
                      "tokens_per_s": tokens / dt, "profiled_s": total, "shim_s": shim, "replacements_s": repl, "adapters_s": adapters,
                      "top_shim": top}))


def _run(args: argparse.Namespace, model: str, tree: Path, backend: str | None) -> dict | None:
    """One worker process under `python -m cudashim run` of the cudashim in `tree`."""
    return _finish(_start(args, model, tree, backend, None), tree)


def _start(args: argparse.Namespace, model: str, tree: Path, backend: str | None, cpu: int | None,
           turns: int | None = None) -> subprocess.Popen:
    # the worker lives next to the example's patch map, as a user's script would; cwd and PYTHONPATH
    # put `tree`'s cudashim first (python -m puts the cwd first on sys.path)
    cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--config", str(EXAMPLE / "cudashim.toml"),
           __file__, "--worker", "--model", model, "--seqs", str(args.seqs), "--repeat", str(args.repeat)]
    cmd += [] if turns is None else ["--turns", str(turns)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), str(EXAMPLE), os.environ.get("PYTHONPATH")])),
           "TOKENIZERS_PARALLELISM": "false"}
    env.pop("CUDASHIM_DISABLE", None)
    if tree != ROOT:
        env.pop("CUDASHIM_CPU_BACKEND", None)  # --against: that checkout's default cpu path
    elif backend:
        env["CUDASHIM_CPU_BACKEND"] = backend
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    return subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=pin, stdin=subprocess.PIPE if turns is not None else None)


def _turn(proc: subprocess.Popen, word: str) -> str | None:
    """Send a word to an --alternate worker; its answer line ("ready", "step|turn <seconds>"), None if it died."""
    if word:
        proc.stdin.write(word + "\n")
        proc.stdin.flush()
    for line in proc.stdout:
        if line.startswith(("ready", "step ", "turn ")):
            return line.strip()
    return None


def _alternate(args: argparse.Namespace, model: str, trees: dict[str, Path]) -> tuple[dict[str, dict], list[float]] | None:
    """Both workers loaded at once, then taking turns on CPU 0, one engine step a turn (which goes first
    alternates every step): a generate's steps on the two sides are milliseconds apart on the same CPU,
    where whole generates one after the other are seconds apart on a host whose speed changes by half
    from one second to the next. Both run the same schedule, so a round (one generate each) ends on
    both at the same step. Per-round ratios this/against of tokens/s (the time in steps)."""
    procs = {side: _start(args, model, tree, args.backend, None, turns=0) for side, tree in trees.items()}
    ratios: list[float] = []
    try:
        if any(_turn(p, "") != "ready" for p in procs.values()):
            raise RuntimeError("a worker did not start")
        for r in range(args.rounds):
            t: dict[str, float] = {}
            step = 0
            while len(t) < 2:
                for side in (["this", "against"] if step % 2 == 0 else ["against", "this"]):
                    answer = _turn(procs[side], "go")
                    if answer is None:
                        raise RuntimeError(f"the {side} worker died")
                    if answer.startswith("turn"):
                        t[side] = float(answer.split()[1])
                step += 1
                if len(t) == 1:
                    raise RuntimeError("the two sides' schedules differ (one finished a step before the other)")
            ratios.append(t["against"] / t["this"])  # tokens/s ratio: the same tokens on both sides
            print(f"round {r + 1}: this {t['this']:.3f} s, against {t['against']:.3f} s, ratio {ratios[-1]:.3f}", flush=True)
    except RuntimeError as e:
        print(f"--alternate: {e}", file=sys.stderr)
    # end of input (communicate() closes it): the worker profiles one more generate and prints its figures
    results = {side: _finish(p, trees[side]) for side, p in procs.items()}
    if any(r is None for r in results.values()) or len(ratios) < args.rounds:
        return None
    return results, ratios


def _finish(proc: subprocess.Popen, tree: Path) -> dict | None:
    out, err = proc.communicate()
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        print(f"worker on {tree} failed:", out[-2000:], err[-4000:], sep="\n")
        return None
    return json.loads(line)


def main() -> int:
    import statistics

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=int, default=16)
    ap.add_argument("--model", default=None, help="checkpoint dir (default: build one in a temp dir)")
    ap.add_argument("--backend", default=None, help="CUDASHIM_CPU_BACKEND for this checkout's runs (e.g. device)")
    ap.add_argument("--against", type=Path, default=None, help="another checkout: its cudashim's default cpu path, same run")
    ap.add_argument("--rounds", type=int, default=1, help="worker runs per side (alternating)")
    ap.add_argument("--repeat", type=int, default=5, help="timed generate() calls per worker (the median is its figure)")
    ap.add_argument("--paired", action="store_true",
                    help="with --against: run both sides at the same time, each pinned to its own CPU (swapped every round)")
    ap.add_argument("--alternate", action="store_true",
                    help="with --against: both workers loaded, taking turns on CPU 0, one engine step a turn (--rounds generates each)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--turns", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return 0
    against = args.against.resolve() if args.against else None
    if against is not None and not (against / "cudashim" / "__init__.py").is_file():
        print(f"--against {args.against}: no cudashim/ package there; give a checkout of this repository", file=sys.stderr)
        return 2
    if args.paired and (against is None or not {0, 1} <= os.sched_getaffinity(0)):
        print("--paired needs --against and CPUs 0 and 1 available to this process", file=sys.stderr)
        return 2
    if args.alternate and (against is None or 0 not in os.sched_getaffinity(0)):
        print("--alternate needs --against and CPU 0 available to this process", file=sys.stderr)
        return 2
    runs: dict[str, list[dict]] = {"this": [], "against": []}
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(Path(tmp) / "qwen3-tiny")
        if args.model is None:
            subprocess.run([sys.executable, str(EXAMPLE / "build_checkpoint.py"), model], check=True, capture_output=True)
        if args.alternate:
            done = _alternate(args, model, {"this": ROOT, "against": against})
            if done is None:
                return 1
            results, ratios = done
            runs = {side: [res] for side, res in results.items()}
        for r in range(0 if args.alternate else args.rounds):
            sides = [("this", ROOT)] + ([("against", against)] if against is not None else [])
            order = sides if r % 2 == 0 else sides[::-1]
            if args.paired:  # both at once, one CPU each, swapped every round: the host's state is theirs alike
                procs = [(side, tree, _start(args, model, tree, args.backend, cpu)) for cpu, (side, tree) in enumerate(order)]
                results = [(side, tree, _finish(proc, tree)) for side, tree, proc in procs]
            else:
                results = [(side, tree, _run(args, model, tree, args.backend)) for side, tree in order]
            for side, tree, res in results:
                if res is None:
                    return 1
                runs[side].append(res)
                print(f"[{side}: {tree}] {res['tokens_per_s']:.1f} tokens/s, backend {res['backend']}, "
                      f"cuda tensors of the emulated device: {res['device_tensors']}", flush=True)
    res = runs["this"][-1]
    share = res["shim_s"] / res["profiled_s"]
    print(f"nano-vllm on cpu under the shim (TP=1, eager): model {res['model_params'] / 1e6:.2f} M params (bf16), "
          f"{res['seqs']} seqs, {res['tokens']} output tokens; CUDASHIM_CPU_BACKEND={res['backend']}, "
          f"cuda tensors of the emulated device: {res['device_tensors']}")
    tps = [r["tokens_per_s"] for r in runs["this"]]
    print(f"throughput: {statistics.median(tps):.1f} tokens/s (median of {len(tps)}: {', '.join(f'{t:.1f}' for t in tps)})")
    if ratios:
        print(f"--against {against} (its default cpu path, device tensors: {runs['against'][-1]['device_tensors']}), "
              f"{len(ratios)} rounds of turns on one CPU: ratio this/against per round {', '.join(f'{x:.3f}' for x in ratios)}; "
              f"median {statistics.median(ratios):.3f} (goal >= 0.95)")
    elif runs["against"]:
        base = [r["tokens_per_s"] for r in runs["against"]]
        ratio = statistics.median(tps) / statistics.median(base)
        print(f"--against {against} (its default cpu path, device tensors: {runs['against'][-1]['device_tensors']}): "
              f"{statistics.median(base):.1f} tokens/s (median of {len(base)}: {', '.join(f'{t:.1f}' for t in base)}); "
              f"ratio this/against {ratio:.3f} (goal >= 0.95)")
    print(f"time in shim machinery under cProfile: {res['shim_s']:.3f} s of {res['profiled_s']:.2f} s = {100 * share:.2f} % "
          f"(goal < 2 %)")
    print(f"  replacement implementations (replacements attention, kernels): {res['replacements_s']:.3f} s "
          f"= {100 * res['replacements_s'] / res['profiled_s']:.2f} %; example adapters: {res['adapters_s']:.3f} s")
    print("  largest machinery entries (self time):")
    for t, name in res["top_shim"]:
        print(f"  {t * 1e3:8.1f} ms  {name}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _results

    figures = {"tokens/s, median": round(statistics.median(tps), 1),
               "shim machinery share of the profiled time (%)": round(100 * share, 2)}
    if ratios:
        figures["this / --against, median of rounds taken in turns"] = round(statistics.median(ratios), 3)
    _results.record("nano_vllm_cpu", figures, goal="machinery < 2 % of the time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
