"""benchmarks/_results.py: figures of a checkout with uncommitted changes are refused unless asked, since
the commit they would name does not hold the code measured; changes under benchmarks/results/ (a run
writing several files) do not count."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, ModuleType]:
    root = tmp_path / "repo"
    (root / "benchmarks" / "results").mkdir(parents=True)
    shutil.copy2(REPO / "benchmarks" / "_results.py", root / "benchmarks" / "_results.py")
    (root / "code.py").write_text("x = 1\n")
    (root / "benchmarks" / "results" / "old.json").write_text("{}\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "c")
    spec = importlib.util.spec_from_file_location("_results_under_test", root / "benchmarks" / "_results.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return root, mod


def test_a_clean_checkout_records(checkout: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch) -> None:
    root, results = checkout
    monkeypatch.delenv(results.ALLOW_DIRTY, raising=False)
    (root / "benchmarks" / "results" / "old.json").write_text('{"changed": 1}\n')  # results/ does not count
    path = results.record("x", {"ratio": 1.0})
    assert "+dirty" not in json.loads(path.read_text())["commit"]


def test_a_dirty_checkout_is_refused(checkout: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch) -> None:
    root, results = checkout
    monkeypatch.delenv(results.ALLOW_DIRTY, raising=False)
    (root / "code.py").write_text("x = 2\n")
    with pytest.raises(results.DirtyTree, match="uncommitted changes.*CUDASHIM_BENCH_ALLOW_DIRTY=1"):
        results.record("x", {"ratio": 1.0})
    assert not (root / "benchmarks" / "results" / "x.json").exists()
    monkeypatch.setenv(results.ALLOW_DIRTY, "1")
    path = results.record("x", {"ratio": 1.0})
    assert json.loads(path.read_text())["commit"].endswith("+dirty")
