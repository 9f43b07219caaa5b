"""nano-vllm's bench.py-style throughput under the shim on cpu (TP=1, eager), with the model size
and the share of the generate() time spent in shim code.

    python benchmarks/bench_nano_vllm.py [--seqs 16] [--model DIR]

The engine runs unmodified under `python -m cudashim run --platform cpu`. Like nano-vllm's own
bench.py it sends a batch of random-token prompts of random lengths with random output lengths
(ignore_eos). A warm-up generate() with the same shapes runs first, so torch.compile's work is not
timed. The timed generate() runs twice: once plain (the throughput figure) and once under cProfile,
whose per-function self time is split into shim machinery (cudashim/ minus the replacement
implementations: aliases, patches, dispatch, report), replacement implementations (cudashim/npu_ops
and cudashim/kernels: the attention and KV-store work that flash-attn and Triton do on a GPU) and
the example's patch-map adapters, against everything else. cProfile inflates Python-heavy code, the
shim's wrappers included, so the share is an upper bound of the share without the profiler.
Goal: shim share under 2 %.
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
SHIM_DIR = str(ROOT / "cudashim")
REPLACEMENTS = (str(ROOT / "cudashim" / "npu_ops"), str(ROOT / "cudashim" / "kernels"))
ADAPTERS = str(EXAMPLE / "adapters.py")


def _worker(args: argparse.Namespace) -> None:
    import cProfile
    import pstats
    import random
    import time

    from nanovllm import LLM, SamplingParams

    llm = LLM(args.model, enforce_eager=True, tensor_parallel_size=1, max_model_len=512,
              max_num_batched_tokens=4096, max_num_seqs=args.seqs, gpu_memory_utilization=0.05)
    rng = random.Random(0)
    vocab = llm.tokenizer.vocab_size
    prompts = [[rng.randint(0, vocab - 1) for _ in range(rng.randint(32, 200))] for _ in range(args.seqs)]
    params = [SamplingParams(temperature=0.6, ignore_eos=True, max_tokens=rng.randint(32, 96)) for _ in range(args.seqs)]
    llm.generate(prompts, params, use_tqdm=False)  # warm-up: compiles every shape the timed runs see

    t = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    dt = time.perf_counter() - t
    tokens = sum(p.max_tokens for p in params)

    prof = cProfile.Profile()
    prof.enable()
    llm.generate(prompts, params, use_tqdm=False)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, func) -> (cc, nc, tottime, cumtime, callers)
    total = sum(v[2] for v in stats.values())
    repl = sum(v[2] for k, v in stats.items() if k[0].startswith(REPLACEMENTS))
    shim = sum(v[2] for k, v in stats.items() if k[0].startswith(SHIM_DIR)) - repl
    adapters = sum(v[2] for k, v in stats.items() if k[0] == ADAPTERS)
    top = sorted(((v[2], f"{Path(k[0]).name}:{k[1]}:{k[2]}") for k, v in stats.items() if k[0].startswith(SHIM_DIR) and not k[0].startswith(REPLACEMENTS)), reverse=True)[:5]

    params_n = sum(p.numel() for p in llm.model_runner.model.parameters())
    print(json.dumps({"model_params": params_n, "seqs": args.seqs, "tokens": tokens, "seconds": dt,
                      "tokens_per_s": tokens / dt, "profiled_s": total, "shim_s": shim, "replacements_s": repl, "adapters_s": adapters,
                      "top_shim": top}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=int, default=16)
    ap.add_argument("--model", default=None, help="checkpoint dir (default: build one in a temp dir)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(Path(tmp) / "qwen3-tiny")
        if args.model is None:
            subprocess.run([sys.executable, str(EXAMPLE / "build_checkpoint.py"), model], check=True, capture_output=True)
        # the worker lives next to the example's patch map, as a user's script would
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--config", str(EXAMPLE / "cudashim.toml"),
               __file__, "--worker", "--model", model, "--seqs", str(args.seqs)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")])),
               "TOKENIZERS_PARALLELISM": "false"}
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith("{")), None)
        if r.returncode != 0 or line is None:
            print(r.stdout[-2000:], r.stderr[-4000:], sep="\n")
            return 1
        res = json.loads(line)
    share = res["shim_s"] / res["profiled_s"]
    print(f"nano-vllm on cpu under the shim (TP=1, eager): model {res['model_params'] / 1e6:.2f} M params (bf16), "
          f"{res['seqs']} seqs, {res['tokens']} output tokens")
    print(f"throughput: {res['tokens_per_s']:.1f} tokens/s ({res['seconds']:.2f} s)")
    print(f"time in shim machinery under cProfile: {res['shim_s']:.3f} s of {res['profiled_s']:.2f} s = {100 * share:.2f} % "
          f"(goal < 2 %)")
    print(f"  replacement implementations (npu_ops attention, kernels): {res['replacements_s']:.3f} s "
          f"= {100 * res['replacements_s'] / res['profiled_s']:.2f} %; example adapters: {res['adapters_s']:.3f} s")
    print("  largest machinery entries (self time):")
    for t, name in res["top_shim"]:
        print(f"  {t * 1e3:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
