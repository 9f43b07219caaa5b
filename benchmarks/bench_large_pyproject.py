"""A shimmed start in a folder whose pyproject.toml is huge and holds no [tool.cudashim], against the
same start in a folder with no pyproject.toml, measured in the same run.

    python benchmarks/bench_large_pyproject.py [--rounds 15] [--mb 200]

Every shimmed interpreter looks for its config from the working folder up to the project root; a
pyproject.toml there is scanned for a [tool.cudashim] header. TOML allows that table anywhere in the
file, so learning it is absent means reading all of it: done once per version of the file, its answer
kept (cudashim/config.py). Variants, fresh interpreters interleaved round by round, `python -c pass`
with the bootstrap on PYTHONPATH (the shim active, platform cpu, so no detection differs):
  - "no pyproject": a folder holding .git (the project root) and nothing else: the baseline;
  - "huge pyproject, answer kept": the --mb MB pyproject.toml, its answer already kept: every start
    after the first;
  - "huge pyproject, first start": the same file with the kept answers removed before each start: what
    the first start after the file changes pays (and what every start paid before answers were kept).
Written: benchmarks/results/large_pyproject.json (medians and the ratios to the baseline).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _results  # noqa: E402
from bench_startup import _env, _time  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--mb", type=int, default=200, help="size of the pyproject.toml, MB")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pkg = root / "pkg"
        pkg.mkdir()
        (pkg / "cudashim").symlink_to(REPO / "cudashim", target_is_directory=True)
        bare, huge, cache = root / "bare", root / "huge", root / "cache"
        (bare / ".git").mkdir(parents=True)
        huge.mkdir()
        line = "# " + "x" * 98 + "\n"
        with open(huge / "pyproject.toml", "w") as f:
            f.write('[project]\nname = "huge"\nversion = "0"\n')
            block = line * 10_000
            for _ in range(a.mb * 1_000_000 // len(block)):
                f.write(block)
        size = (huge / "pyproject.toml").stat().st_size
        env = _env(pkg, True, CUDASHIM_PLATFORM="cpu", XDG_CACHE_HOME=str(cache))
        argv = [sys.executable, "-c", "pass"]

        def run(name: str) -> float:
            if name == "huge pyproject, first start":
                shutil.rmtree(cache, ignore_errors=True)
            folder = bare if name == "no pyproject" else huge
            import os

            here = os.getcwd()
            os.chdir(folder)
            try:
                return _time(argv, env)[0]
            finally:
                os.chdir(here)

        names = ["no pyproject", "huge pyproject, answer kept", "huge pyproject, first start"]
        for n in names:  # the file cache warm, the bytecode compiled; not counted
            run(n)
        run("huge pyproject, answer kept")
        wall: dict[str, list[float]] = {n: [] for n in names}
        for r in range(a.rounds):
            for n in names[r % 3:] + names[: r % 3]:
                if n == "huge pyproject, answer kept":
                    run("huge pyproject, answer kept")  # (a first start just ran: keep the answer again)
                wall[n].append(run(n))
    med = {n: statistics.median(xs) for n, xs in wall.items()}
    for n in names:
        print(f"  {n:<32} median {med[n] * 1e3:8.2f} ms (min {min(wall[n]) * 1e3:.2f}, n={len(wall[n])})")
    kept = med["huge pyproject, answer kept"] / med["no pyproject"]
    first = med["huge pyproject, first start"] / med["no pyproject"]
    # each round ran every variant back to back: the median of per-round ratios is least moved by drift
    paired = statistics.median(k / b for k, b in zip(wall["huge pyproject, answer kept"], wall["no pyproject"]))
    print(f"huge pyproject ({size / 1e6:.0f} MB) vs none: {kept:.2f}x with its answer kept (per-round median "
          f"{paired:.2f}x), {first:.2f}x on a first start")
    _results.record("large_pyproject", {
        "pyproject MB": round(size / 1e6, 1),
        "no pyproject, median ms": round(med["no pyproject"] * 1e3, 2),
        "huge pyproject, answer kept, median ms": round(med["huge pyproject, answer kept"] * 1e3, 2),
        "huge pyproject, first start, median ms": round(med["huge pyproject, first start"] * 1e3, 2),
        "ratio, answer kept / no pyproject": round(kept, 3),
        "ratio, answer kept / no pyproject, median of per-round ratios": round(paired, 3),
        "ratio, first start / no pyproject": round(first, 3),
    }, goal="a start with a huge pyproject.toml without [tool.cudashim] costs what a start without one costs, "
            "once its answer is kept (ratio ~1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
