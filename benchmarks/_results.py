"""Where a benchmark's figures go: one JSON file per benchmark under benchmarks/results/.

Each file holds the figures and how they were got — the command, the UTC date, the host (CPU model,
cores, load at the time), the commit — so a figure is never separated from its conditions. The docs
quote these files only through generated blocks (`python scripts/generate.py --write`), so a sentence and
its figure cannot disagree.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

__all__ = ["RESULTS", "host", "commit", "record", "DirtyTree", "ALLOW_DIRTY"]

#: set to 1 to record figures measured on a checkout with uncommitted changes (the file says "+dirty")
ALLOW_DIRTY = "CUDASHIM_BENCH_ALLOW_DIRTY"


class DirtyTree(SystemExit):
    """Figures of uncommitted code name a commit that does not hold that code: refused unless asked."""


def host() -> dict[str, Any]:
    """The machine, as far as a figure depends on it."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version()}
    try:
        info["load"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch"] = torch.__version__
    # the driver's own files name the GPU without a CUDA context (a benchmark may not want one)
    for f in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        model = next((ln.split(":", 1)[1].strip() for ln in f.read_text().splitlines() if ln.startswith("Model:")), None)
        if model:
            info["gpu"] = model
            break
    return info


def commit() -> str | None:
    """HEAD of the checkout, with '+dirty' when the tree has uncommitted changes (results/ aside: a run
    that writes several files changes it itself)."""
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                f":!{RESULTS.relative_to(repo).as_posix()}"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def record(name: str, figures: dict[str, Any], *, goal: str | None = None, note: str | None = None,
           table: dict[str, Any] | None = None, out: Path | None = None) -> Path:
    """Write benchmarks/results/<name>.json (or `out`) and return its path.

    `figures`: the headline numbers, name -> value (ratios against a baseline of the same run);
    `table`: optional {"columns": [...], "rows": [[...], ...]} for figures that are a table.
    Refused (DirtyTree) when the checkout has uncommitted changes, unless CUDASHIM_BENCH_ALLOW_DIRTY=1.
    """
    made_at = commit()
    path = out or RESULTS / f"{name}.json"
    if made_at and made_at.endswith("+dirty") and os.environ.get(ALLOW_DIRTY) != "1":
        raise DirtyTree(f"not writing {path}: the checkout has uncommitted changes, so the figures would name a "
                        f"commit ({made_at}) that does not hold the code measured; commit first, or set "
                        f"{ALLOW_DIRTY}=1 to record them as measured on a dirty tree")
    data: dict[str, Any] = {
        "benchmark": name,
        "figures": figures,
        "goal": goal,
        "note": note,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host(),
        "commit": made_at,
    }
    if table is not None:
        data["table"] = table
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"results: {path}")
    return path
