"""Judge greedy runs step by step against a float64 oracle of the same weights, teacher-forced.

    python examples/nano_vllm/compare.py MODEL_DIR RUN.json [RUN.json ...] [--json report.json]

A run (what run.py or reference.py writes: prompts and the token ids generated for each) passes when,
at every step, the token it chose is one a correct bf16 engine may choose. The oracle is transformers
on the bf16 checkpoint upcast to float64, on the CPU, fed the run's own tokens (prompt + generated):
one forward per prompt gives the exact logits at every step of that run, so a step taken differently
from another engine is judged on its own and never derails the steps after it.

Why not "the same tokens as transformers": two correct engines round differently (bf16 GEMMs, flash
kernels, fused norms), and a random model's top two logits are sometimes closer than that rounding;
over 32 greedy steps one such near-tie is likely, and after it the two runs continue from different
text. Token equality then fails between transformers on a GPU and on a CPU, both correct.

The tolerance is bf16's: a bf16 engine's logit for token v is the oracle's up to an error bounded by
a few units of bf16 rounding of the largest logit (the LM head's output is rounded to bf16, and its
input, the final hidden state, is bf16 after a chain of bf16-rounded layers). A step passes when
    oracle[top] - oracle[chosen] <= TOL_ULPS * ulp_bf16(max |oracle logit|)
where ulp_bf16(x) = 2 ** (floor(log2 x) - 7). Steps whose oracle margin (top1 - top2) is under that
bound are ambiguous: either token passes there. The report gives the smallest margin along each run
and how many steps were ambiguous: a wide-margin checkpoint leaves few, so most steps are decided
exactly and a defect that moves logits by more than bf16 rounding shows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

# bf16 logit error allowed, in ulps of the step's largest |logit|: see the module docstring and
# docs/gpu.md for the measurement that fixed it (bf16 engines stay within a fraction of it).
TOL_ULPS = 8.0


def ulp_bf16(x: float) -> float:
    """Spacing of bf16 numbers at magnitude x (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(max(x, 1e-30))) - 7)


def load_oracle(model_dir: str | Path):
    """(tokenizer, float64 model on the CPU)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float64)
    return tok, model.eval()


def oracle_logits(tok, model, prompt: str, generated: list[int]):
    """float64 logits (len(generated), vocab): row t is what the oracle predicts for generated[t]."""
    import torch

    ids = tok.encode(prompt)
    full = torch.tensor([ids + list(generated)])
    with torch.no_grad():
        logits = model(full, attention_mask=torch.ones_like(full)).logits[0]
    return logits[len(ids) - 1: len(ids) - 1 + len(generated)].double()


def logit_error_ulps(tok, model, oracle, prompt: str, generated: list[int]) -> float:
    """Largest |model logit - oracle logit| along one run, teacher-forced, in ulps of each step's largest
    |oracle logit|: the rounding error of a bf16 `model` wherever it runs. The tolerance assumes it is at
    most TOL_ULPS / 2 (the chosen token's and the top token's errors add up in a deficit)."""
    import torch

    ref = oracle_logits(tok, oracle, prompt, generated)
    ids = tok.encode(prompt)
    dev = next(model.parameters()).device
    full = torch.tensor([ids + list(generated)], device=dev)
    with torch.no_grad():
        got = model(full, attention_mask=torch.ones_like(full)).logits[0]
    got = got[len(ids) - 1: len(ids) - 1 + len(generated)].double().cpu()
    return max(float((got[t] - ref[t]).abs().max()) / ulp_bf16(float(ref[t].abs().max())) for t in range(len(generated)))


def judge(logits, generated: list[int], tol_ulps: float = TOL_ULPS) -> dict:
    """Per-step verdicts for one prompt's generated tokens against its oracle logits."""
    import torch

    top2 = torch.topk(logits, 2, dim=-1)
    steps = []
    for t, chosen in enumerate(generated):
        row = logits[t]
        best, second = float(top2.values[t, 0]), float(top2.values[t, 1])
        tol = tol_ulps * ulp_bf16(float(row.abs().max()))
        deficit = best - float(row[chosen])
        steps.append({"chosen": int(chosen), "top": int(top2.indices[t, 0]), "deficit": deficit,
                      "margin": best - second, "tol": tol, "ok": deficit <= tol})
    return {
        "steps": len(steps),
        "failed_steps": [i for i, s in enumerate(steps) if not s["ok"]],
        "ambiguous_steps": sum(s["margin"] <= s["tol"] for s in steps),
        "min_margin": min(s["margin"] for s in steps) if steps else math.inf,
        "min_margin_in_tol": min(s["margin"] / s["tol"] for s in steps) if steps else math.inf,
        "max_deficit_in_tol": max(s["deficit"] / s["tol"] for s in steps) if steps else 0.0,
        "detail": steps,
    }


def check_run(tok, model, run: dict, tol_ulps: float = TOL_ULPS) -> dict:
    """Verdicts for every prompt of one run; 'ok' when every step of every prompt passed."""
    prompts = [judge(oracle_logits(tok, model, p, g), g, tol_ulps) for p, g in zip(run["prompts"], run["token_ids"])]
    return {"ok": all(not p["failed_steps"] for p in prompts), "prompts": prompts}


def summary(name: str, res: dict) -> str:
    lines = [f"{name}: {'PASS' if res['ok'] else 'FAIL'}"]
    for i, p in enumerate(res["prompts"]):
        lines.append(f"  prompt {i}: {p['steps']} steps, failed {p['failed_steps'] or 'none'}, "
                     f"ambiguous {p['ambiguous_steps']}, smallest margin {p['min_margin']:.4g} "
                     f"({p['min_margin_in_tol']:.2f} tol), largest deficit {p['max_deficit_in_tol']:.2f} tol")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("runs", nargs="+", type=Path, help="JSON files with 'prompts' and 'token_ids'")
    parser.add_argument("--tol-ulps", type=float, default=TOL_ULPS)
    parser.add_argument("--json", type=Path, default=None, help="write the verdicts here (without per-step detail)")
    args = parser.parse_args(argv)
    tok, model = load_oracle(args.model)
    report, ok = {}, True
    for path in args.runs:
        res = check_run(tok, model, json.loads(path.read_text()), args.tol_ulps)
        print(summary(path.name, res))
        ok = ok and res["ok"]
        report[path.name] = {"ok": res["ok"], "prompts": [{k: v for k, v in p.items() if k != "detail"}
                                                          for p in res["prompts"]]}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
