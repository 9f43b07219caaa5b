"""Regenerate the blocks of the docs that quote data, so a figure and its sentence cannot disagree.

    python scripts/docs.py --write     # rewrite every generated block in README.md and docs/*.md
    python scripts/docs.py --check     # exit 1 naming each block that is out of date (CI runs this)

A block is the text between `<!-- results:NAME -->` and `<!-- /results:NAME -->`: it renders
benchmarks/results/NAME.json (its figures or table, goal, command, date, host and commit). Prose around
a block states what is measured and why; the numbers live only in the JSON. The capability table has
its own generator (`python -m cudashim.platform.capabilities --write`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    g.add_argument("--check", action="store_true", help="exit 1 if a block is out of date")
    args = ap.parse_args(argv)
    if args.write:
        for doc in _documents():
            text = doc.read_text(encoding="utf-8")
            new = refresh(text)
            if new != text:
                doc.write_text(new, encoding="utf-8")
                print(f"rewrote {doc.relative_to(REPO)}")
        return 0
    bad = stale()
    for b in bad:
        print(f"out of date: {b} (run `python scripts/docs.py --write`)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
