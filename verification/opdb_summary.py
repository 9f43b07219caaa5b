"""The figures of an operator-database sweep for the docs: per mode the cases and the share equal to the
CPU, and the cases not equal grouped by operator, mode, outcome and the first line of their detail.

    python verification/opdb_summary.py benchmarks/results/opdb_npu.json     # -> results/opdb_npu_summary.json

The sweep's own table (`opdb_sweep.py --out`) holds every case; this writes the digest that
docs/operator-coverage.md quotes through its `<!-- results:opdb_<device>_summary -->` block, with the
sweep's command, date and commit in its note (what the figures were measured with).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "benchmarks")]  # _results: the one writer of results files
import _results  # noqa: E402
from opdb_cases import CODES  # noqa: E402

__all__ = ["digest", "write", "main"]

GOALS = {"forward": 0.999, "backward": 0.995}


def _cause(detail: str) -> str:
    """The first line of a case's detail without what differs from one sample to the next."""
    line = detail.strip().splitlines()[0] if detail.strip() else ""
    line = re.sub(r"^output \d+: ", "", line)
    line = re.sub(r"^(Tensor-likes|Scalars) are not close!.*", "values differ beyond tolerance", line)
    line = re.sub(r"setStorage: sizes \[.*", "setStorage: a result's storage out of bounds", line)
    line = re.sub(r"\b(npu|cuda):\d+\b", r"\1", line)
    return line[:160]


def digest(sweep: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(figures, table) of a sweep's result."""
    figures: dict[str, Any] = {}
    for mode, m in sweep["summary"].items():
        figures[f"{mode}: cases"] = m["cases"]
        figures[f"{mode}: share equal"] = m["equal_share"]
        if mode in GOALS:
            figures[f"{mode}: goal {GOALS[mode]} met"] = m["equal_share"] >= GOALS[mode]
        refused = m["codes"].get("n", 0)
        if refused:
            # the simulated NPU's refusals are counted as equal (they are the NPU's outcome): the share of
            # the calls it runs shows the values apart from them
            figures[f"{mode}: refused as torch_npu refuses (n)"] = refused
            ran = m["cases"] - refused
            figures[f"{mode}: share equal of the calls the device runs"] = round(
                sum(m["codes"].get(c, 0) for c in "=rc") / ran, 5) if ran else None
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for r in sweep["not_equal"]:
        groups.setdefault((r["op"], r["mode"], r["code"], _cause(r["detail"])), []).append(r["dtype"])
    rows = [[op, mode, code, len(dtypes), ", ".join(sorted(set(dtypes))), cause]
            for (op, mode, code, cause), dtypes in sorted(groups.items())]
    table = {"columns": ["operator", "mode", "code", "cases", "dtypes", "detail (first line)"], "rows": rows}
    return figures, table


def write(sweep: dict[str, Any], source: Path) -> Path:
    """Write results/opdb_<device>_summary.json from a sweep's result read from (or written to) `source`:
    the one writer of that file (opdb_sweep.py calls it after a full sweep)."""
    figures, table = digest(sweep)
    used = {c for m in sweep["summary"].values() for c in m["codes"]}
    name = f"opdb_{sweep['device']}_summary"
    options = {k: v for k, v in sweep["options"].items() if v and k != "ran"}  # "ran": the ops a re-run took
    try:
        shown = source.resolve().relative_to(HERE.parent).as_posix()
    except ValueError:
        shown = source.as_posix()
    return _results.record(name, figures, table=table,
                           goal=f"forward at least {GOALS['forward']} and backward at least {GOALS['backward']} of the cases equal",
                           note=(f"From the sweep `{sweep['command']}` of {sweep['date']} at `{sweep['commit'][:12]}` "
                                 f"(torch {sweep['torch']}, {sweep['ops']} OpInfos, options {options}, "
                                 f"{sweep['seconds']} s; every case in `{shown}`)."
                                 + "".join(f" Then `{u['command']}` at `{u['commit'][:12]}` ({len(u['ops'])} OpInfos run "
                                           f"again, {u['date']})." for u in sweep.get("updates", []))
                                 + " Codes: "
                                 + "; ".join(f"`{k}` {v}" for k, v in CODES.items() if k != "=" and k in used) + "."))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path, help="a result of opdb_sweep.py")
    a = ap.parse_args(argv)
    write(json.loads(a.sweep.read_text()), a.sweep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
