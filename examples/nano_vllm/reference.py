"""transformers' greedy `generate` on the same weights, on the CPU, without the shim: the oracle.

    python examples/nano_vllm/reference.py MODEL_DIR --json ref.json [--max-tokens 32]
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
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16)
    model.eval()
    out = []
    for prompt in PROMPTS:
        ids = torch.tensor([tok.encode(prompt)])
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=args.max_tokens, min_new_tokens=args.max_tokens, pad_token_id=tok.pad_token_id)
        out.append(gen[0, ids.shape[1]:].tolist())
    with open(args.json, "w") as f:
        json.dump({"prompts": PROMPTS, "token_ids": out}, f)
    print(f"reference: {len(out)} prompts, first -> {tok.decode(out[0])[:80]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
