"""What the e2e files share: examples/nano_vllm's tiny checkpoint and transformers' reference run on it,
each made once per test run, and the float64 judge of a run."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from nano_vllm_e2e import EXAMPLE, common_prefix, run


def _once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A folder `name` made by make(folder) once per test run. Under pytest-xdist every worker of one run
    has its own temporary folder under a common one: the first to ask makes it there, holding a lock, and
    the others take its result; a run without workers makes it in its own folder."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else tmp_path_factory.getbasetemp()
    out = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (out / ".done").exists():
            out.mkdir(exist_ok=True)
            make(out)
            (out / ".done").write_text("")
    return out


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/nano_vllm/build_checkpoint.py's output (deterministic: a seeded model, a tokenizer trained
    on the standard library's sources); the tests only read it."""

    def build(out: Path) -> None:
        r = run([str(EXAMPLE / "build_checkpoint.py"), str(out)])
        assert r.returncode == 0, r.stderr[-3000:]

    return _once(tmp_path_factory, "qwen3-tiny", build)


@pytest.fixture(scope="session")
def reference(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """transformers' bf16 greedy run on the CPU: {"prompts", "token_ids"}."""

    def generate(out: Path) -> None:
        r = run([str(EXAMPLE / "reference.py"), str(checkpoint), "--json", str(out / "ref.json")])
        assert r.returncode == 0, r.stderr[-3000:]

    return json.loads((_once(tmp_path_factory, "nano-vllm-ref", generate) / "ref.json").read_text())


@pytest.fixture(scope="session")
def compare() -> Any:
    spec = importlib.util.spec_from_file_location("nano_vllm_compare", EXAMPLE / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def oracle(compare: Any, checkpoint: Path) -> Any:
    return compare.load_oracle(checkpoint)


@pytest.fixture(scope="session")
def judge(compare: Any, oracle: Any, reference: dict) -> Callable[[Path, str], bool]:
    """judge(path, name): whether every step of every prompt of the run written to path passes the
    float64 comparison (the run's common prefix with transformers' bf16 tokens is printed beside)."""

    def _judge(path: Path, name: str) -> bool:
        got = json.loads(path.read_text())
        res = compare.check_run(*oracle, got)
        print("\n" + compare.summary(name, res))
        for i, (g, ref) in enumerate(zip(got["token_ids"], reference["token_ids"])):
            common_prefix(g, ref, f"  {name} vs transformers' bf16 generate, prompt {i}")
        return res["ok"]

    return _judge
