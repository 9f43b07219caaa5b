"""`python -m cudashim patches [--json] [--check]`: every patch active for this platform, its source and state.

`--check` imports every replacement of the config and looks its symbol up (exit 0 when all are
there, 2 otherwise, each failure naming its config line): what the start-up check cannot see
without running code (a module `__getattr__`, star imports, a replacement failing on import).

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

from ..config import Config, explain_config, load_config
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


def check(config: Config, platform: str) -> list[str]:
    """Import every replacement of the config's patches on `platform` and look its symbol up; the
    problems found, one line each naming the config line (empty: all good)."""
    import os

    from .._locate import import_replacement
    from ..patches._apply import get_path

    folder = os.path.dirname(os.fspath(config.path)) if config.path is not None else None
    problems = []
    for entry in config.patches_for(platform):
        module, _, symbol = entry.replacement.partition(":")
        try:
            get_path(import_replacement(module, folder), symbol)
        except AttributeError:
            problems.append(f"{entry.target} -> {entry.replacement}: {module!r} has no attribute {symbol!r} "
                            f"(from {entry.source})")
        except Exception as e:  # noqa: BLE001 - whatever importing the replacement raised is the finding
            problems.append(f"{entry.target} -> {entry.replacement}: importing {module!r} raised "
                            f"{type(e).__name__}: {e} (from {entry.source})")
    return problems


def _table(data: list[dict[str, Any]], platform: str, why: str, config_line: str = "") -> str:
    lines = [f"platform: {platform} ({why})", *([config_line] if config_line else []), f"{len(data)} patch(es) active"]
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
    parser.add_argument("--check", action="store_true",
                        help="import every replacement and verify its symbol; exit 2 when one fails")
    args = parser.parse_args(argv)
    try:
        config = load_config(path=args.config)
        check_config(config)
        found, config_why = explain_config(path=args.config)
        config_line = f"config: {found or 'none'} ({config_why})"
        if args.platform:
            platform, why = args.platform, "--platform"
        else:
            from ..platform import resolve_platform_name

            platform, why = resolve_platform_name(config)
        data = rows(config, platform)
    except CudashimError as e:
        print(f"cudashim patches: {e}", file=sys.stderr)
        return 2
    if args.check:
        problems = check(config, platform)
        print(config_line)
        for line in problems:
            print(f"FAIL {line}")
        checked = len(config.patches_for(platform))
        print(f"{checked - len(problems)} of {checked} replacement(s) import and have their symbol")
        return 2 if problems else 0
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(_table(data, platform, why, config_line))
    return 0
