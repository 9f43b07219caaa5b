"""The third-party subjects: pinned test suites and CUDA-written programs.

Nothing here is copied from the subjects: suites come as their sdists from the package index (pinned
versions, downloaded by `verification/third_party.py --setup`), programs from their repositories at
pinned commits (read-only checkouts the user points to with `--sources`), and so do the tests of a
suite whose sdist ships none. Each program runs with its
own command-line options only; where it needs a data set, `make_*` below writes a small synthetic one
where the program's options make it look (no downloads, never an edit of the program).
"""

from __future__ import annotations

import pickle
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["Suite", "Program", "SUITES", "PROGRAMS", "REPOS", "PROGRAM_PINS"]


@dataclass(frozen=True)
class Suite:
    """A project's own test suite, from its sdist, run once on the CPU and once with CUDA chosen."""

    name: str
    pin: str                 # pip requirement, exact version
    sdist_dir: str           # top folder inside the sdist
    tests: tuple[str, ...]   # test paths inside the sdist, copied into a fresh folder to run
    how_cuda: str            # how the suite selects CUDA (for the report)
    # A suite whose sdist ships no tests comes from its repository at a pinned commit instead (`repo`, a key
    # of REPOS, exported with `git archive`, so the checkout's own state does not matter); `files`: what
    # else of the source tree its tests need (the root conftest.py, helper packages).
    repo: str = ""
    files: tuple[str, ...] = ()
    cpu_args: tuple[str, ...] = ()   # pytest options of the CPU run ...
    cuda_args: tuple[str, ...] = ()  # ... and of the CUDA run, where the suite picks its device by option


# How each suite picks CUDA was read from the suite itself; the CPU run is the same files, plain torch.
SUITES: tuple[Suite, ...] = (
    Suite("roma", "roma==1.8.0", "roma-1.8.0", ("test",),
          "module-level `device = torch.device(0) if torch.cuda.is_available() else cpu`"),
    Suite("torchsde", "torchsde==0.2.6", "torchsde-0.2.6",
          # test_brownian_path.py: the others take > 15 min on the CPU alone here (statistical tests);
          # test_sdeint.py / test_adjoint.py import tests/problems.py, which the sdist does not ship
          ("tests/test_brownian_path.py",),
          "tests parametrized over [cpu, cuda]; the cuda cases call `pytest.skip(msg=...)` without CUDA, "
          "which pytest >= 8 turns into a TypeError: on the CPU they fail instead of skipping"),
    # two example files rich in `_cuda` cases (the whole test/ takes hours on 2 cores)
    Suite("gpytorch", "gpytorch==1.15.2", "gpytorch-1.15.2",
          tuple(f"test/examples/test_{n}.py" for n in (
              "simple_gp_regression", "sgpr_regression")),
          "`test_*_cuda` methods that run their case on cuda only `if torch.cuda.is_available()`"),
    # depthwise convolutions (filter2d/filter3d: `conv2d(..., groups=C)`) under gradcheck, and DexiNed's
    # transposed convolutions; kornia's sdists ship no tests, so they come from the release's commit.
    # One file: the whole tests/filters takes over an hour per run on 2 cores.
    Suite("kornia", "kornia==0.8.2", "kornia-0.8.2", ("tests/filters/test_filters.py",),
          "the root conftest's `--device` option (cpu, or cuda:0 when torch.cuda.is_available())",
          repo="kornia", files=("conftest.py", "testing"), cpu_args=("--device", "cpu"), cuda_args=("--device", "cuda")),
)

# Repositories the programs come from, at the commits these figures were taken with.
REPOS: dict[str, tuple[str, str]] = {
    "pytorch-examples": ("https://github.com/pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8"),
    "nanoGPT": ("https://github.com/karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"),
    "minGPT": ("https://github.com/karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26"),
    "makemore": ("https://github.com/karpathy/makemore", "988aa59e4d8fefa526d06f3b453ad116258398d4"),
    "kornia": ("https://github.com/kornia/kornia", "856fd1ae6becd4300646db2b44ea3507e4ab0066"),  # v0.8.2
}
# what the programs import beyond torch and numpy (makemore logs through torch.utils.tensorboard)
PROGRAM_PINS: tuple[str, ...] = ("tensorboard==2.21.0",)


@dataclass(frozen=True)
class Program:
    """An unmodified CUDA-written program: its CPU run (plain torch) against its CUDA run under the shim."""

    name: str
    repo: str                      # key of REPOS
    folder: str                    # folder of the repository the program runs in (its cwd)
    argv: tuple[str, ...]          # script and options common to both runs
    cpu_args: tuple[str, ...] | None  # the program's own way to pick the CPU; None: it has none
    cuda_args: tuple[str, ...]     # ... and CUDA
    figures: str                   # regex; every match's groups are the figures compared
    rtol: float = 0.0              # 0: exactly equal
    why_rtol: str = ""
    make_data: Callable[[Path], None] | None = None
    after: str = ""                # a program whose run directory this one reuses (a checkpoint)
    env: dict[str, str] = field(default_factory=dict)
    output_file: str = ""          # a file the program writes, read after its stdout for the figures
    expect: tuple[str, ...] = ()   # no CPU run: the figures its CUDA run must print (in any order)


def _words(seed: int, n_lines: int) -> str:
    """Text with structure a language model can learn: a fixed grammar over a 300-word vocabulary."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(300)]
    lines = []
    for _ in range(n_lines):
        w = rng.randrange(300)
        line = []
        for _ in range(rng.randrange(5, 15)):
            line.append(vocab[w])
            w = (w * 7 + rng.choice((1, 2, 3))) % 300
        lines.append(" ".join(line))
    return "\n".join(lines) + "\n"


def make_wikitext_like(cwd: Path) -> None:
    """word_language_model reads `--data DIR`/{train,valid,test}.txt (wikitext-2's train.txt is not in the repo)."""
    d = cwd / "synthetic-corpus"
    d.mkdir(exist_ok=True)
    for split, seed, n in (("train", 1, 1500), ("valid", 2, 150), ("test", 3, 150)):
        (d / f"{split}.txt").write_text(_words(seed, n))


def make_cora_like(cwd: Path) -> None:
    """gat/main.py reads ./cora/cora.content (`<paper id> <0/1 word flags…> <class>` per line) and
    ./cora/cora.cites (`<cited id> <citing id>`), downloading Cora only when they are absent. It splits
    the nodes 1200 test / 400 validation / the rest training, so 1800 nodes; words and citations
    follow the class, so there is something to learn."""
    rng = random.Random(5)
    n_nodes, n_words, classes = 1800, 120, ("Case_Based", "Neural_Networks", "Theory", "Rule_Learning")
    ids = rng.sample(range(1000, 10**6), n_nodes)
    label = [rng.randrange(len(classes)) for _ in ids]
    d = cwd / "cora"
    d.mkdir(exist_ok=True)
    lines = []
    for pid, c in zip(ids, label):
        words = ["1" if rng.random() < (0.3 if w % len(classes) == c else 0.05) else "0" for w in range(n_words)]
        lines.append(f"{pid}\t" + "\t".join(words) + f"\t{classes[c]}")
    (d / "cora.content").write_text("\n".join(lines) + "\n")
    by_class = [[p for p, c in zip(ids, label) if c == k] for k in range(len(classes))]
    cites = set()
    for pid, c in zip(ids, label):
        for _ in range(3):
            other = rng.choice(by_class[c] if rng.random() < 0.8 else ids)
            if other != pid:
                cites.add((other, pid))
    (d / "cora.cites").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(cites)))


def make_char_dataset(cwd: Path) -> None:
    """nanoGPT reads data/<dataset>/{train,val}.bin (uint16 ids) and meta.pkl (char vocabulary), as its
    shakespeare_char prepare.py writes them."""
    import numpy as np

    text = _words(4, 3000)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    d = cwd / "data" / "synthetic_char"
    d.mkdir(parents=True, exist_ok=True)
    n = int(0.9 * len(ids))
    ids[:n].tofile(d / "train.bin")
    ids[n:].tofile(d / "val.bin")
    with open(d / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)


_NUM = r"([-+]?\d+\.\d+(?:e[-+]?\d+)?)"
_NANOGPT_MODEL = ("--dataset=synthetic_char", "--out_dir=out", "--n_layer=2", "--n_head=2", "--n_embd=64",
                  "--block_size=64", "--batch_size=8", "--gradient_accumulation_steps=1", "--max_iters=40",
                  "--eval_interval=20", "--eval_iters=5", "--log_interval=5", "--warmup_iters=5",
                  "--lr_decay_iters=40", "--learning_rate=1e-3", "--compile=True")

_DDP_TUTORIAL_LINES = tuple(f"[GPU{r}] Epoch {e} | Batchsize: 32 | Steps: 32" for r in (0, 1) for e in (0, 1))

PROGRAMS: tuple[Program, ...] = (
    Program(
        "word_language_model (LSTM, torch.accelerator)", "pytorch-examples", "word_language_model",
        ("main.py", "--data", "synthetic-corpus", "--emsize", "64", "--nhid", "64", "--epochs", "2",
         "--dropout", "0", "--log-interval", "10", "--save", "model.pt"),
        (), ("--accel",),
        r"loss +(\d+\.\d+) \| (?:valid |test )?ppl +(\d+\.\d+)",
        make_data=make_wikitext_like),
    Program(
        "word_language_model generate.py (torch.accelerator, the LSTM run's checkpoint)", "pytorch-examples",
        "word_language_model",
        ("generate.py", "--data", "synthetic-corpus", "--checkpoint", "model.pt", "--words", "200",
         "--outf", "generated.txt"),
        (), ("--accel",),
        r"(?s)(.+)", output_file="generated.txt",
        after="word_language_model (LSTM, torch.accelerator)"),
    Program(
        "word_language_model (Transformer, torch.accelerator)", "pytorch-examples", "word_language_model",
        ("main.py", "--data", "synthetic-corpus", "--model", "Transformer", "--emsize", "64", "--nhid", "64",
         "--epochs", "2", "--dropout", "0", "--lr", "1", "--log-interval", "10", "--save", "model.pt"),
        (), ("--accel",),
        # --lr 1: the default lr 20 makes this Transformer diverge (valid ppl 3e7) on the CPU too
        r"loss +(\d+\.\d+) \| (?:valid |test )?ppl +(\d+\.\d+)",
        make_data=make_wikitext_like),
    Program(
        "gat (torch.accelerator)", "pytorch-examples", "gat",
        # dropout 0: on cuda it draws from the device's own generator, on the CPU from the CPU's
        ("main.py", "--epochs", "40", "--val-every", "5", "--hidden-dim", "16", "--num-heads", "4",
         "--dropout-p", "0"),
        ("--no-accel",), (),
        rf"(?:loss_train|acc_train|loss_val|acc_val|loss|accuracy):? {_NUM}",
        make_data=make_cora_like),
    Program(
        "nanoGPT train.py (torch.compile, float32)", "nanoGPT", ".",
        ("train.py", *_NANOGPT_MODEL, "--dtype=float32"),
        ("--device=cpu",), ("--device=cuda",),
        rf"(?:loss|train loss|val loss) {_NUM}",
        make_data=make_char_dataset),
    Program(
        "nanoGPT train.py (torch.compile under autocast bfloat16)", "nanoGPT", ".",
        ("train.py", *_NANOGPT_MODEL, "--dtype=bfloat16"),
        ("--device=cpu",), ("--device=cuda",),
        rf"(?:loss|train loss|val loss) {_NUM}",
        rtol=0.02,
        why_rtol="on cuda the program autocasts to bfloat16 (8-bit mantissa); its CPU branch runs without "
                 "autocast (nullcontext), so the CPU figure is float32's",
        make_data=make_char_dataset),
    Program(
        "nanoGPT sample.py (top_k=1, torch.compile, the float32 run's checkpoint)", "nanoGPT", ".",
        ("sample.py", "--out_dir=out", "--num_samples=2", "--max_new_tokens=60", "--top_k=1",
         "--compile=True", "--dtype=float32"),
        ("--device=cpu",), ("--device=cuda",),
        r"(?s)Loading meta from [^\n]*\n(.+)",  # the samples (the lines before echo the options)
        after="nanoGPT train.py (torch.compile, float32)"),
    Program(
        # equal only once the device runs the CPU's native_layer_norm (README: the layer-norm ulp)
        "minGPT projects/adder (trainer device auto)", "minGPT", ".",
        ("projects/adder/adder.py", "--trainer.max_iters=501", "--trainer.num_workers=0",
         "--model.embd_pdrop=0.0", "--model.resid_pdrop=0.0", "--model.attn_pdrop=0.0",
         "--system.work_dir=out"),
        ("--trainer.device=cpu",), (),
        rf"train loss {_NUM}|final score: (\d+/\d+)",
        env={"PYTHONPATH": "."}),
    Program(
        "makemore (transformer, --device cuda)", "makemore", ".",
        # the names.txt the repository ships; samples printed at steps 200 and 400 draw from the device's
        # generator on cuda and from the CPU's on the CPU (as on a GPU), so only the losses are compared
        ("makemore.py", "--max-steps", "500", "--num-workers", "0", "-o", "out"),
        ("--device", "cpu"), ("--device", "cuda"),
        rf"step \d+ \| loss {_NUM}"),
    # DDP programs: without CUDA they train nothing (multigpu*.py spawn torch.cuda.device_count() = 0
    # workers, ddp/example.py prints "Unable to locate sufficient 2 gpus"), and they print no figures
    # of their training: their CUDA runs on two devices must print each rank's lines and exit 0
    Program(
        "ddp-tutorial-series multigpu.py (mp.spawn, nccl, 2 devices)", "pytorch-examples",
        "distributed/ddp-tutorial-series", ("multigpu.py", "2", "1"), None, (),
        r"(\[GPU\d\] Epoch \d \| Batchsize: \d+ \| Steps: \d+)", expect=_DDP_TUTORIAL_LINES,
        env={"CUDASHIM_CPU_DEVICES": "2"}),
    Program(
        "ddp-tutorial-series multigpu_torchrun.py (torchrun, nccl, 2 devices)", "pytorch-examples",
        "distributed/ddp-tutorial-series",
        ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "multigpu_torchrun.py", "2", "1"),
        None, (), r"(\[GPU\d\] Epoch \d \| Batchsize: \d+ \| Steps: \d+)", expect=_DDP_TUTORIAL_LINES,
        env={"CUDASHIM_CPU_DEVICES": "2"}),
    Program(
        "ddp example.py (torchrun, torch.accelerator, 2 devices)", "pytorch-examples", "distributed/ddp",
        ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "example.py"), None, (),
        r"(training completed in rank \d!)", expect=("training completed in rank 0!", "training completed in rank 1!"),
        env={"CUDASHIM_CPU_DEVICES": "2"}),
)


def figures(program: Program, output: str) -> list[str]:
    """The figures a run printed, in order (every group of every match of the program's regex)."""
    out: list[str] = []
    for m in re.finditer(program.figures, output):
        out.extend(g for g in m.groups() if g is not None)
    return out
