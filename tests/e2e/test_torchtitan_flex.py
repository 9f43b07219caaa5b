"""torchtitan (PyPI torchtitan==0.3.0, installed by scripts/install's optional line), its own training
entry, unmodified, under `python -m cudashim run torchrun` on the cpu platform: the llama3 debug model it
ships, whose attention is compiled `flex_attention` with gradients, FSDP2 on a one-device mesh (the trainer
applies `fully_shard` at every shard degree), the whole TransformerBlocks compiled as well, the whole
forward-backward step captured in a CUDA graph and replayed (torchtitan's default), a few steps.

What the wheel does not ship is made here: its debug config reads a tokenizer and a small text dataset
from ./tests/assets of the torchtitan repository, so the test writes both into the run's folder (a BPE
tokenizer trained on the dataset's text, a JSON-lines file `datasets` loads from disk); nothing is fetched.
torchrun's program is _torchtitan_launch.py, which adds the one torch function torchtitan 0.3.0 calls and
the installed torch lacks, then runs `torchtitan.train` as `python -m` would.

Judged: the run ends cleanly, every step's loss is finite and the loss falls at every step; the run
without the step's CUDA graph prints the same losses; the run with the blocks left eager (torchtitan still
compiles its flex attention then) gives the first two steps' losses to bf16 rounding, since both start
from the same seeded weights and batches. Plain torch on the CPU is no oracle: torchtitan 0.3.0 needs a
CUDA-like device and stops there in `torch.cuda.set_device`.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = Path(__file__).with_name("_torchtitan_launch.py")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.subprocess,
    pytest.mark.skipif(importlib.util.find_spec("torchtitan") is None,
                       reason="torchtitan is not installed: run scripts/install (its optional torchtitan line)"),
]

WORDS = ("the cat sat on a mat dog ran to park and then slept in sun big small red blue house").split()


def _assets(folder: Path) -> None:
    """./tests/assets/{tokenizer,c4_test} as torchtitan's llama3_debugmodel reads them (seeded text)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + "." for _ in range(200)]
    data = folder / "tests" / "assets" / "c4_test"
    data.mkdir(parents=True)
    (data / "c4.json").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tdir = folder / "tests" / "assets" / "tokenizer"
    tdir.mkdir(parents=True)
    tok.save(str(tdir / "tokenizer.json"))
    (tdir / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
        "add_bos_token": True, "add_eos_token": True}))


def _train(folder: Path, steps: int, *options: str) -> tuple[list[float], str]:
    """torchtitan's llama3_debugmodel trained `steps` steps on the emulated device with its command-line
    options; the losses it logged and its output."""
    args = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu",
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", str(LAUNCH),
            "--module", "llama3", "--config", "llama3_debugmodel",
            "--training.steps", str(steps), "--training.seq-len", "128", "--training.local-batch-size", "2",
            "--checkpoint.no-enable", "--validator.freq", "1000",
            "--metrics.log-freq", "1", "--metrics.disable-color-printing", *options]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_DATASETS_CACHE": str(folder / "hf-cache")}
    r = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    losses = [float(x) for x in re.findall(r"step:\s*\d+\s+loss:\s*(\S+)", out)]
    assert len(losses) == steps, out[-6000:]
    return losses, out


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("torchtitan")
    _assets(folder)
    return folder


def test_torchtitan_trains_with_compiled_flex_attention_and_fsdp2(assets: Path) -> None:
    losses, out = _train(assets, 6, "--compile.enable")
    # torchtitan captures the whole forward-backward step in one CUDA graph by default and replays it
    # from the next step on: the run went through capture and replay
    assert "Recorded CUDA graph" in out, out[-6000:]
    assert all(math.isfinite(v) for v in losses), losses
    # seeded weights on a 2048-token vocabulary start near ln(2048) = 7.6; six AdamW steps on text of
    # twenty words bring it well down
    assert losses[0] > 7.0 and losses[-1] < losses[0] - 1.5, losses
    assert all(b < a for a, b in zip(losses, losses[1:])), losses

    # the same steps without the step's CUDA graph: the same compiled code on the same batches, so the
    # replays, which read each step's new batch and the updated weights, print the same losses
    no_graph, out = _train(assets, 6, "--compile.enable", "--training.disable-cuda-graphs")
    assert "Recorded CUDA graph" not in out
    assert no_graph == losses, (no_graph, losses)

    # two steps: the first update's learning rate is the warm-up's whatever the run's length, so both
    # losses are comparable; eager blocks are slow on the device, more steps would add only time
    eager, _ = _train(assets, 2, "--compile.no-enable")
    # bf16 parameters (torchtitan's FSDP2 mixed precision): a relative 2e-3 is a few bf16 roundings
    assert eager == pytest.approx(losses[:2], rel=2e-3), (eager, losses)
