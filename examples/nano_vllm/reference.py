"""transformers' greedy `generate` on the same bf16 weights, without the shim: a second engine's run.

    python examples/nano_vllm/reference.py MODEL_DIR --json ref.json [--max-tokens 32] [--device cuda]

Its tokens are judged like the engine's, by compare.py (a float64 oracle, step by step): on a GPU,
transformers' own bf16 kernels round differently from the CPU's, so token equality with it is not
a test there; both runs passing compare.py is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import PROMPTS  # noqa: E402  (same prompts as the engine run)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--json", required=True)
    parser.add_argument("--device", default="cpu", help="where transformers runs (cpu, cuda)")
    parser.add_argument("--logit-error", action="store_true",
                        help="also measure this model's bf16 logit error along its runs against compare.py's "
                             "float64 oracle (teacher-forced), in ulps; written to the JSON as logit_error_ulps")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).to(args.device)
    model.eval()
    out = []
    for prompt in PROMPTS:
        ids = torch.tensor([tok.encode(prompt)], device=args.device)
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=args.max_tokens, min_new_tokens=args.max_tokens, pad_token_id=tok.pad_token_id)
        out.append(gen[0, ids.shape[1]:].tolist())
    result = {"prompts": PROMPTS, "token_ids": out}
    if args.logit_error:
        from compare import load_oracle, logit_error_ulps

        _, oracle = load_oracle(args.model)
        result["logit_error_ulps"] = [logit_error_ulps(tok, model, oracle, p, g) for p, g in zip(PROMPTS, out)]
        print(f"bf16 logit error on {args.device} against float64, ulps of the largest logit, per prompt: "
              + ", ".join(f"{e:.2f}" for e in result["logit_error_ulps"]))
    with open(args.json, "w") as f:
        json.dump(result, f)
    print(f"reference: {len(out)} prompts, first -> {tok.decode(out[0])[:80]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
