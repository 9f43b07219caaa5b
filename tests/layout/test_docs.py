"""The house for readers: the README is the user's document, the docs cannot drift from their data.

- README.md stays short (at most 300 lines) with the two commands (run the main job; install and pass
  the tests) before line 60, and links every doc in docs/;
- user documents name no issue numbers (history belongs in commits);
- every generated block (`<!-- results:NAME -->`) equals what scripts/docs.py renders from
  benchmarks/results/NAME.json, and every results file it quotes exists.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))


def _docs_module():
    spec = importlib.util.spec_from_file_location("_docs", REPO / "scripts" / "docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_is_short_with_the_two_commands_first() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md is {len(lines)} lines; move what is not for a user into docs/"
    head = "\n".join(lines[:60])
    assert "bash scripts/install && python -m cudashim run examples/serve.py" in head, "the main job's command"
    assert re.search(r"^bash scripts/test$", head, re.M), "the test command"
    assert (REPO / ".ci" / "run").read_text().count("scripts/test") == 1, ".ci/run runs the README's test command"


def test_readme_links_every_doc() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [d.name for d in DOCS if f"docs/{d.name}" not in text]
    assert not missing, f"docs not linked from README.md: {missing}"


def test_user_documents_name_no_issue() -> None:
    pattern = re.compile(r"\b[Ii]ssues?\s*#?\d+|issue's\b")
    found = [f"{p.name}:{n}: {line.strip()[:80]}" for p in [README, *DOCS]
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, "issue references in user documents:\n" + "\n".join(found)


def test_generated_blocks_are_current() -> None:
    docs = _docs_module()
    assert docs.stale() == [], "run `python scripts/generate.py --write`"
    quoted = {m.group("name") for p in [README, *DOCS] for m in docs.BLOCK.finditer(p.read_text(encoding="utf-8"))}
    assert quoted, "no generated block found: the marker format changed?"


def test_a_changed_figure_makes_its_block_stale(tmp_path, monkeypatch) -> None:
    docs = _docs_module()
    results = tmp_path / "results"
    results.mkdir()
    (results / "x.json").write_text('{"figures": {"ratio": 1.0}, "date": "d", "commit": "c", "command": "b"}')
    monkeypatch.setattr(docs, "RESULTS", results)
    text = "<!-- results:x -->\n<!-- /results:x -->\n"
    fresh = docs.refresh(text)
    assert "| ratio | 1 |" in fresh
    (results / "x.json").write_text('{"figures": {"ratio": 0.5}, "date": "d", "commit": "c", "command": "b"}')
    assert docs.refresh(fresh) != fresh, "a figure changed in its results file must change the block"
