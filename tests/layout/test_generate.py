"""One command renders every derived text and checks the seams no import follows (scripts/generate.py).

Each kind of drift is planted in a copy of the repository and must fail the check, naming the file:
a results block edited by hand, a variable added to cudashim/envs.py without its reference, a test
folder or a native source missing from docs/contributing.md's tree, a module looked up in sys.modules
by a name that no longer exists, a file in csrc/ that the native build leaves out.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_generate_under_test", REPO / "scripts" / "generate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    return _generate()


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", "__pycache__", "build", "*.egg-info", "_csrc",
                                                              ".benchmarks", ".pytest_cache", ".hypothesis"))
    return root


def test_the_repository_is_current(generate: ModuleType) -> None:
    assert generate.check(REPO) == [], "run `python scripts/generate.py --write` (and see what it names)"


def test_the_copy_is_current(generate: ModuleType, copy: Path) -> None:
    """The planted failures below are failures of the plant, not of the copy."""
    assert generate.check(copy) == []


def test_a_results_block_edited_by_hand_is_stale(generate: ModuleType, copy: Path) -> None:
    doc = copy / "docs" / "benchmarks.md"
    text = doc.read_text(encoding="utf-8")
    begin = text.index("<!-- results:")
    start = text.index("\n", begin) + 1
    doc.write_text(text[:start] + "| figure | value |\n|---|---|\n| ratio | 9.99 |\n" + text[start:], encoding="utf-8")
    assert generate.check(copy) == ["docs/benchmarks.md: stale; run `python scripts/generate.py --write`"]
    generate.write(copy)
    assert generate.check(copy) == []


def test_a_changed_results_file_makes_its_block_stale(generate: ModuleType, copy: Path) -> None:
    import json

    path = copy / "benchmarks" / "results" / "startup.json"
    data = json.loads(path.read_text())
    data["date"] = "another day"
    path.write_text(json.dumps(data))
    assert any(p.startswith(("README.md: stale", "docs/benchmarks.md: stale")) for p in generate.check(copy))


def test_a_variable_without_its_reference_is_stale(generate: ModuleType, copy: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from cudashim import envs

    rows = dict(envs._READ_ROWS)
    rows["CUDASHIM_PLANTED"] = (envs._bool, False, "a variable added to envs.py, its reference not regenerated")
    monkeypatch.setattr(envs, "_READ_ROWS", rows)
    assert generate.check(copy) == ["docs/environment.md: stale; run `python scripts/generate.py --write`"]
    generate.write(copy)
    assert "CUDASHIM_PLANTED" in (copy / "docs" / "environment.md").read_text()


def test_a_test_folder_missing_from_the_map_fails(generate: ModuleType, copy: Path) -> None:
    (copy / "tests" / "planted").mkdir()
    (copy / "tests" / "planted" / "test_x.py").write_text('"""x"""\n')
    problems = generate.check(copy)
    assert "docs/contributing.md: stale; run `python scripts/generate.py --write`" in problems
    assert any(p.startswith("tests/planted: says nothing of itself") for p in problems), problems


def test_a_native_source_missing_from_the_map_fails(generate: ModuleType, copy: Path) -> None:
    (copy / "csrc" / "ops" / "planted.cpp").write_text("// A planted operator file.\n")
    assert generate.check(copy) == ["docs/contributing.md: stale; run `python scripts/generate.py --write`"]
    generate.write(copy)
    assert "planted.cpp" in (copy / "docs" / "contributing.md").read_text()


def test_a_module_looked_up_by_a_dead_name_fails(generate: ModuleType, copy: Path) -> None:
    graphs = copy / "cudashim" / "emulated" / "npu" / "graphs.py"
    text = graphs.read_text(encoding="utf-8")
    assert 'sys.modules.get("cudashim.report.readiness")' in text
    graphs.write_text(text.replace('"cudashim.report.readiness"', '"cudashim.report_readiness"'), encoding="utf-8")
    problems = generate.check(copy)
    assert len(problems) == 1 and problems[0].startswith("cudashim/emulated/npu/graphs.py:"), problems
    assert "'cudashim.report_readiness', which does not exist" in problems[0]


@pytest.mark.parametrize("lookup", ['sys.modules["cudashim.gone"]', '"cudashim.gone" in sys.modules',
                                    'importlib.import_module("cudashim.gone")', 'sys.modules.pop("cudashim.gone", None)'])
def test_every_form_of_lookup_is_seen(generate: ModuleType, lookup: str) -> None:
    import ast

    assert [name for _, name in generate._looked_up(ast.parse(f"import sys, importlib\n{lookup}\n"))] == ["cudashim.gone"]


def test_a_csrc_file_left_out_of_the_build_fails(generate: ModuleType, copy: Path) -> None:
    (copy / "csrc" / "ops" / "planted.inc").write_text("// An included fragment the cache key would not see.\n")
    problems = generate.check(copy)
    assert "csrc/ops/planted.inc: not part of the native build (neither compiled nor in the cache key); name it " \
           ".cpp or .h, or move it out of csrc/" in problems, problems


def test_a_block_whose_results_file_is_missing_fails(generate: ModuleType, copy: Path) -> None:
    (copy / "benchmarks" / "results" / "startup.json").unlink()
    problems = generate.check(copy)
    assert any(p.endswith("quotes benchmarks/results/startup.json, which does not exist; run its benchmark, or "
                          "remove the block") for p in problems), problems


def test_a_citation_of_a_missing_design_section_fails(generate: ModuleType, copy: Path) -> None:
    cite = "docs/design.md " + "§9"  # whole, the citation would be this file's own
    (copy / "cudashim" / "planted.py").write_text(f'"""Planted ({cite})."""\n')
    assert generate.check(copy)[-1] == f"cudashim/planted.py:1: cites {cite}, which it does not have"


def test_a_changed_layer_makes_the_contributing_map_stale(generate: ModuleType, copy: Path) -> None:
    pyproject = copy / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(text.replace('    "cudashim.report",\n', '    "cudashim.report",\n    "cudashim.planted",\n', 1),
                         encoding="utf-8")
    assert generate.check(copy) == ["docs/contributing.md: stale; run `python scripts/generate.py --write`"]
