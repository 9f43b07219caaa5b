"""`python -m cudashim patches [--json]`: every patch active for this platform, its source and state.

Inside a shimmed process (the hook installed) the states are live: applied, stood-in, native
(nvidia kept the real module) or pending (target never imported). Outside one, every patch is
pending and `expect` says what loading its target would do, judged by find_spec on the target's
top-level package (nothing is imported).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from ..config import Config, load_config
from ..errors import CudashimError
from ..patches.packs import ABSENT_ONLY, check_config
from ..platform import PLATFORMS

__all__ = ["main", "rows"]


def _installed(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def rows(config: Config, platform: str) -> list[dict[str, Any]]:
    """Live status() when the hook is installed in this process, else the plan with expectations."""
    from ..patches import installed, plan, status

    if installed():
        return status()
    out = []
    for entry, mode in plan(config, platform):
        present = _installed(entry.target.split(":")[0].split(".")[0])
        expect = "stand-in" if not present else ("native" if mode == ABSENT_ONLY else "patch")
        out.append({"target": entry.target, "replacement": entry.replacement, "source": entry.source,
                    "platform": platform, "state": "pending", "expect": expect, "resolved": False, "rebound": []})
    return out


def _table(data: list[dict[str, Any]], platform: str, why: str) -> str:
    lines = [f"platform: {platform} ({why})", f"{len(data)} patch(es) active"]
    if not data:
        return "\n".join(lines)
    cols = ("target", "replacement", "state", "source")
    width = {c: max(len(c), *(len(_cell(r, c)) for r in data)) for c in cols[:-1]}
    lines.append("  ".join(c.upper().ljust(width.get(c, 0)) for c in cols).rstrip())
    for r in data:
        lines.append("  ".join(_cell(r, c).ljust(width.get(c, 0)) for c in cols).rstrip())
    return "\n".join(lines)


def _cell(row: dict[str, Any], col: str) -> str:
    value = str(row[col])
    if col == "state":
        if "expect" in row:
            value += f" (would {row['expect']})" if row["expect"] != "stand-in" else " (would stand in)"
        if row.get("rebound"):
            value += f" rebound in {', '.join(row['rebound'])}"
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cudashim patches", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--config", type=Path, help="config file to use instead of searching")
    parser.add_argument("--platform", choices=PLATFORMS, help="list for this platform instead of the detected one")
    args = parser.parse_args(argv)
    try:
        config = load_config(start=Path.cwd(), path=args.config)
        check_config(config)
        if args.platform:
            platform, why = args.platform, "--platform"
        else:
            from ..platform import resolve_platform_name

            platform, why = resolve_platform_name(config)
        data = rows(config, platform)
    except CudashimError as e:
        print(f"cudashim patches: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(_table(data, platform, why))
    return 0
