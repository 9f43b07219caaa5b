"""The results blocks of the docs, rendered from their data, so a figure and its sentence cannot disagree.

`python scripts/generate.py --write` renders them with every other generated text (`--check`: a test
fails when one is stale); this module renders one block.

A block is the text between `<!-- results:NAME -->` and `<!-- /results:NAME -->`: it renders
benchmarks/results/NAME.json (its figures or table, goal, command, date, host and commit). Prose around
a block states what is measured and why; the numbers live only in the JSON. The capability table has
its own source (cudashim/platform/capabilities.py); scripts/generate.py renders both.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(x) for x in v)
    return str(v).replace("|", "\\|").replace("\n", " ")


def render(name: str) -> str:
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        return f"*No results recorded yet: run the benchmark to write `benchmarks/results/{name}.json`.*\n"
    data = json.loads(path.read_text())
    lines: list[str] = []
    figures = data.get("figures") or {}
    if figures:
        lines += ["| figure | value |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in figures.items()]
    table = data.get("table")
    if table:
        if lines:
            lines.append("")
        lines += ["| " + " | ".join(table["columns"]) + " |", "|" + "---|" * len(table["columns"])]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table["rows"]]
    host = data.get("host") or {}
    where = ", ".join(str(x) for x in (host.get("gpu"), host.get("cpu"), host.get("cores") and f"{host['cores']} cores",
                                       host.get("torch") and f"torch {host['torch']}",
                                       host.get("load") and f"load {host['load'][0]}") if x)
    lines.append("")
    if data.get("goal"):
        lines.append(f"Goal: {data['goal']}.")
    if data.get("note"):
        lines.append(data["note"])
    lines.append(f"Measured {data.get('date', '?')} at `{data.get('commit') or '?'}` on {where or '?'}: "
                 f"`{data.get('command', '?')}` (`benchmarks/results/{name}.json`).")
    return "\n".join(lines) + "\n"


def _documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def refresh(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name")) + m.group(4), text)


def stale() -> list[str]:
    out = []
    for doc in _documents():
        text = doc.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            if m.group("body") != render(m.group("name")):
                out.append(f"{doc.relative_to(REPO)}: block results:{m.group('name')}")
    return out


def main(argv: list[str] | None = None) -> int:
    """`--write` / `--check`: scripts/generate.py's, which covers these blocks and every other generated text."""
    spec = importlib.util.spec_from_file_location("_generate", Path(__file__).with_name("generate.py"))
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return int(generate.main(argv))


if __name__ == "__main__":
    raise SystemExit(main())
