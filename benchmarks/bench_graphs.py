"""CUDA graph replay vs eager for nano-vllm's decode step on the emulated device, same run.

    python benchmarks/bench_graphs.py [--model DIR] [--batch 1,8] [--context 64] [--steps 30]

nano-vllm runs unmodified under `python -m cudashim run --platform cpu`
and enforce_eager=False, so its ModelRunner captures one graph per batch size at start-up. In the same
process and on the same weights, one decode step is timed two ways, alternating round by round:
  eager  - what nano-vllm runs with enforce_eager=True: model(...) then compute_logits(...)
  replay - what it runs with graphs: ModelRunner.run_model(..., is_prefill=False), which copies the
           inputs into the graph's static tensors, replays the graph and computes the logits.
The figure is the ratio of median step times (eager / replay); goal: replay >= 1.2x eager. Both
paths get the same context (block tables, lengths, slot mapping); their logits are compared too.
One intra-op thread, so neighbours on a shared box move both paths alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "nano_vllm"


def _worker(args: argparse.Namespace) -> None:
    import torch
    from nanovllm import LLM
    from nanovllm.utils.context import reset_context, set_context

    torch.set_num_threads(1)  # one intra-op thread: the 2-core box is shared; both paths get the same
    llm = LLM(args.model, enforce_eager=False, max_model_len=512, max_num_batched_tokens=1024, max_num_seqs=16,
              gpu_memory_utilization=0.05)
    mr = llm.model_runner
    block = mr.block_size
    out = {}
    for bs in args.batch:
        ids = torch.randint(0, 1000, (bs,), device="cuda")
        pos = torch.full((bs,), args.context - 1, device="cuda")
        nblk = (args.context + block - 1) // block
        table = torch.arange(bs * nblk, dtype=torch.int32, device="cuda").reshape(bs, nblk)
        slots = table[:, (args.context - 1) // block] * block + (args.context - 1) % block
        lens = torch.full((bs,), args.context, dtype=torch.int32, device="cuda")

        def eager() -> torch.Tensor:
            return mr.model.compute_logits(mr.model(ids, pos))

        def replay() -> torch.Tensor:
            return mr.run_model(ids, pos, False)

        times: dict[str, list[float]] = {"eager": [], "replay": []}
        with torch.inference_mode():
            set_context(False, slot_mapping=slots, context_lens=lens, block_tables=table)
            diff = (eager().float() - replay().float()).abs().max().item()
            for _ in range(args.steps):
                for name, fn in (("eager", eager), ("replay", replay)):
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
            reset_context()
        e, r = statistics.median(times["eager"]), statistics.median(times["replay"])
        out[bs] = {"eager_ms": e * 1e3, "replay_ms": r * 1e3, "speedup": e / r, "max_logit_diff": diff}
    print(json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint dir (default: build one in a temp dir)")
    ap.add_argument("--batch", default="1,8", help="decode batch sizes, comma-separated (each <= 16)")
    ap.add_argument("--context", type=int, default=64, help="tokens already in each sequence's KV cache")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per path and batch size")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.batch = [int(b) for b in str(args.batch).split(",")]
    if args.worker:
        _worker(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = str(Path(tmp) / "ckpt")
            subprocess.run([sys.executable, str(EXAMPLE / "build_checkpoint.py"), model], check=True, capture_output=True)
        # nano-vllm's @torch.compile functions run compiled in both paths (their C++ kernels are captured too)
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")])))  # adapters.py
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--config", str(EXAMPLE / "cudashim.toml"),
               __file__, "--worker", "--model", model, "--batch", ",".join(map(str, args.batch)),
               "--context", str(args.context), "--steps", str(args.steps)]
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-4000:], file=sys.stderr)
            return r.returncode
        res = json.loads(next(ln for ln in reversed(r.stdout.splitlines()) if ln.startswith("{")))
    print(f"nano-vllm decode step on the emulated device, context {args.context}, median of {args.steps} (same run):")
    for bs, v in res.items():
        print(f"  batch {bs:>2}: eager {v['eager_ms']:7.2f} ms  graph replay {v['replay_ms']:7.2f} ms  "
              f"replay/eager speed-up {v['speedup']:.2f}x (goal >= 1.2x)  max |logit diff| {v['max_logit_diff']:.3g}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _results

    _results.record("graphs_replay", {}, goal="replay at least 1.2x faster than eager",
                    table={"columns": ["batch", "eager ms", "replay ms", "replay/eager speed-up", "max |logit diff|"],
                           "rows": [[bs, round(v["eager_ms"], 3), round(v["replay_ms"], 3), round(v["speedup"], 3),
                                     v["max_logit_diff"]] for bs, v in res.items()]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
