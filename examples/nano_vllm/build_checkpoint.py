"""Build a tiny random Qwen3 checkpoint locally — no hub — for running nano-vllm under the shim.

    python examples/nano_vllm/build_checkpoint.py OUT_DIR

The tokenizer is a byte-level BPE trained here on local text (the Python standard library's source,
which every machine with Python has), vocabulary > 10 000. The model has 2 layers; KV heads × head
dim (2 × 64 = 128) is a power of two; weights are bf16. The LM head is scaled by 50, which keeps
the sampler's softmax at temperature 1e-5 one-hot wherever the top logit leads. It does not make
greedy decisions immune to rounding: scaling every logit scales the gaps and bf16's spacing alike,
and a random model's top two logits are sometimes closer than bf16 rounding, so two correct engines
may pick different tokens there. examples/nano_vllm/compare.py judges runs step by step with a bf16
tolerance instead, and reports those ambiguous steps and the smallest margin along each run.
"""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

VOCAB = 12_000
SEED = 0


def _corpus(limit_bytes: int = 6_000_000) -> list[str]:
    """Deterministic local text: stdlib sources in sorted order, up to limit_bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    total = 0
    for path in sorted(root.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out.append(text)
        total += len(text)
        if total >= limit_bytes:
            break
    return out


def build_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>")
    fast.save_pretrained(out)
    return fast


def build_model(out: Path, vocab_size: int, eos_id: int, pad_id: int) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=1024,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=eos_id,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(SEED)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(50.0)  # see the module docstring
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(args.out)
    build_model(args.out, len(tok), tok.eos_token_id, tok.pad_token_id)
    n = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out} (vocab {len(tok)}, {n / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
