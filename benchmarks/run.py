"""Run benchmarks, each in its own process, and print what they print.

    python benchmarks/run.py              # every benchmarks/bench_*.py
    python benchmarks/run.py detect ...   # by name: 'detect', 'bench_detect' or 'bench_detect.py'

A fresh process per benchmark keeps one benchmark's imports and caches out of the next one's
"cold" numbers. Exit status 1 when any benchmark failed or timed out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _resolve(name: str) -> Path:
    stem = Path(name).name
    stem = stem[:-3] if stem.endswith(".py") else stem
    stem = stem if stem.startswith("bench_") else f"bench_{stem}"
    path = HERE / f"{stem}.py"
    if not path.is_file():
        known = ", ".join(p.stem[len("bench_"):] for p in sorted(HERE.glob("bench_*.py")))
        raise SystemExit(f"run.py: no benchmark {name!r} in {HERE}; known: {known or 'none'}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: all bench_*.py)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per benchmark (default 600)")
    args = ap.parse_args(argv)
    paths = [_resolve(n) for n in args.names] or sorted(HERE.glob("bench_*.py"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    failed = []
    for path in paths:
        print(f"=== {path.name}", flush=True)
        t0 = time.perf_counter()
        try:
            rc = subprocess.run([sys.executable, str(path)], cwd=REPO, env=env, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        print(f"--- {path.name}: rc={rc} in {time.perf_counter() - t0:.1f}s\n", flush=True)
        if rc != 0:
            failed.append(path.name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
