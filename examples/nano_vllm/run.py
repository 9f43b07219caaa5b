"""Drive nano-vllm's own `LLM(...).generate(...)` — CUDA-written, unmodified — and print tokens/s.

    python -m cudashim run examples/nano_vllm/run.py MODEL_DIR [--tp 2] [--graphs] [--json out.json]

Nothing here knows about the shim: on a CUDA box with flash-attn this same file runs as is.
Greedy decoding: nano-vllm refuses temperature 0, so a temperature of 1e-5 is used; with the
checkpoint's LM head scaled up (see build_checkpoint.py) the softmax is one-hot in float32 wherever
the top logit leads, so the step picks the argmax (at an exact bf16 tie either token). Judge the
tokens written with --json by compare.py.
"""

from __future__ import annotations

import argparse
import json
import time

PROMPTS = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n",
    "class Config:\n    def __init__(self",
    "for i in range(10):",
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--graphs", action="store_true", help="let nano-vllm capture CUDA graphs (enforce_eager=False)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--num-prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.05)
    parser.add_argument("--json", default=None, help="write prompts and generated token ids here")
    args = parser.parse_args()

    from nanovllm import LLM, SamplingParams

    llm = LLM(
        args.model,
        enforce_eager=not args.graphs,
        tensor_parallel_size=args.tp,
        max_model_len=512,
        max_num_batched_tokens=1024,
        max_num_seqs=16,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.num_prompts)]
    params = SamplingParams(temperature=1e-5, max_tokens=args.max_tokens, ignore_eos=True)
    llm.generate(prompts[:1], SamplingParams(temperature=1e-5, max_tokens=2, ignore_eos=True), use_tqdm=False)  # warm-up
    t = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    dt = time.perf_counter() - t
    n = sum(len(o["token_ids"]) for o in outs)
    print(f"nano-vllm: {len(prompts)} prompts, {n} tokens in {dt:.2f} s: {n / dt:.1f} tokens/s "
          f"(tp={args.tp}, {'graphs' if args.graphs else 'eager'})")
    print("first prompt ->", repr(outs[0]["text"][:80]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"prompts": prompts, "token_ids": [o["token_ids"] for o in outs], "tokens_per_s": n / dt}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
