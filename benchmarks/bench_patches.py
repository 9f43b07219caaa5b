"""Cost of the patch hook, measured against a baseline taken in the same run.

1. Import overhead: fresh interpreters import 500 generated modules plus a list of stdlib modules,
   with the hook installed (built-in packs, as a real run has them) and without; the two kinds of
   run are interleaved and the median of each is taken. Goal: < 2 us per import.
   Fresh interpreters are noisy on a loaded machine, so the generated modules are also re-imported
   many times in one interpreter (hook on/off alternating), and the finder's bail-out for a module
   nobody watches is timed on its own: that call is the whole per-import cost of the hook.
2. Call path: a patched function (both `from X import f` and `X.f`) against calling the replacement
   directly. Goal: ratio 1.00 within noise (the target holds the real object, nothing wraps it).

    python benchmarks/bench_patches.py [--rounds 7] [--modules 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STDLIB = [
    "json", "csv", "decimal", "fractions", "statistics", "difflib", "textwrap", "string", "shlex",
    "argparse", "logging", "logging.handlers", "email.message", "email.parser", "email.mime.text",
    "html.parser", "http.client", "urllib.request", "urllib.parse", "xml.dom.minidom",
    "xml.etree.ElementTree", "sqlite3", "zipfile", "tarfile", "gzip", "bz2", "lzma", "hashlib", "hmac",
    "secrets", "uuid", "ipaddress", "calendar", "datetime", "zoneinfo", "pprint", "dataclasses", "enum",
    "queue", "sched", "selectors", "socket", "ssl", "unittest", "doctest", "pdb", "cProfile", "pstats",
    "tracemalloc", "wave", "colorsys", "imghdr", "plistlib", "configparser", "tomllib", "netrc",
    "mailbox", "mimetypes", "base64", "binascii", "quopri", "ast", "dis", "inspect", "tokenize",
    "pickletools", "shelve", "dbm", "filecmp", "fnmatch", "glob", "tempfile", "shutil", "pathlib",
    "concurrent.futures", "multiprocessing", "asyncio", "contextvars", "graphlib", "heapq", "bisect",
    "array", "copy", "numbers", "cmath", "random", "operator", "functools", "itertools",
]

CHILD = """
import os, sys, time, warnings, importlib
warnings.simplefilter("ignore")
sys.path[:0] = [{gen!r}, {repo!r}]
from cudashim import patches
from cudashim.config import Config
mode = {mode!r}
if mode == "hook":
    patches.install(Config(), "cpu")
names = [n for n in {stdlib!r} + ["genmod_%d" % i for i in range({n})] if n not in sys.modules]
t0 = time.perf_counter_ns()
for n in names:
    try:
        importlib.import_module(n)
    except Exception:
        pass
t1 = time.perf_counter_ns()
print(len(names), t1 - t0)
"""


def _generate(folder: Path, n: int) -> None:
    for i in range(n):
        (folder / f"genmod_{i}.py").write_text(f"VALUE = {i}\ndef f():\n    return VALUE\n")


def _child(mode: str, gen: Path, n: int) -> tuple[int, int]:
    code = CHILD.format(gen=str(gen), repo=str(REPO), mode=mode, stdlib=STDLIB, n=n)
    env = dict(os.environ, CUDASHIM_DISABLE="1")
    out = subprocess.run([sys.executable, "-I", "-c", code], env=env, capture_output=True, text=True, check=True)
    count, ns = out.stdout.split()
    return int(count), int(ns)


def bench_imports(rounds: int, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        gen = Path(tmp)
        _generate(gen, n)
        _child("plain", gen, n)  # warm the file system cache and write the .pyc files
        _child("hook", gen, n)
        plain: list[float] = []
        hook: list[float] = []
        count = 0
        for r in range(rounds):  # interleaved, order alternating, so drift in machine load hits both alike
            for mode in (("plain", "hook") if r % 2 == 0 else ("hook", "plain")):
                count, ns = _child(mode, gen, n)
                (plain if mode == "plain" else hook).append(ns / count)
    return {
        "imports": count,
        "plain_us_per_import": statistics.median(plain) / 1e3,
        "hook_us_per_import": statistics.median(hook) / 1e3,
        "overhead_us_per_import": (statistics.median(hook) - statistics.median(plain)) / 1e3,
        # noise floor: half the spread of the baseline runs; an overhead inside it is not measurable
        "noise_us_per_import": (max(plain) - min(plain)) / 2 / 1e3,
    }


REIMPORT = """
import sys, time, importlib, statistics, warnings
sys.path[:0] = [{gen!r}, {repo!r}]
from cudashim import patches
from cudashim.config import Config
names = ["genmod_%d" % i for i in range({n})]
for n in names:
    importlib.import_module(n)            # compile and cache once
plain, hook = [], []
for r in range({rounds}):
    for mode in (("plain", "hook") if r % 2 else ("hook", "plain")):
        if mode == "hook":
            patches.install(Config(), "cpu")
        for n in names:
            del sys.modules[n]
        importlib.invalidate_caches()
        t0 = time.perf_counter_ns()
        for n in names:
            importlib.import_module(n)
        dt = (time.perf_counter_ns() - t0) / len(names)
        (hook if mode == "hook" else plain).append(dt)
        patches.uninstall()
print(statistics.median(plain), statistics.median(hook))
"""


def bench_reimport(rounds: int, n: int) -> dict[str, float]:
    """Same interpreter, the generated modules re-imported with and without the hook, interleaved."""
    with tempfile.TemporaryDirectory() as tmp:
        gen = Path(tmp)
        _generate(gen, n)
        code = REIMPORT.format(gen=str(gen), repo=str(REPO), n=n, rounds=rounds * 3)
        env = dict(os.environ, CUDASHIM_DISABLE="1")
        out = subprocess.run([sys.executable, "-I", "-c", code], env=env, capture_output=True, text=True, check=True)
    plain, hook = (float(x) for x in out.stdout.split())
    return {"reimport_plain_us": plain / 1e3, "reimport_hook_us": hook / 1e3, "reimport_overhead_us": (hook - plain) / 1e3}


def bench_bailout() -> float:
    sys.path.insert(0, str(REPO))
    from cudashim.config import Config
    from cudashim import patches
    from cudashim import importhook as _hook

    patches.install(Config(), "cpu")
    number = 200_000
    best = min(timeit.repeat(lambda: _hook.FINDER.find_spec("not_a_target_mod", None), number=number, repeat=5))
    patches.uninstall()
    return best / number * 1e6


def bench_call(rounds: int) -> dict[str, float]:
    from cudashim import patches
    from cudashim.config import Config, PatchEntry

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bench_target.py").write_text("def f(x):\n    return x\n")
        Path(tmp, "bench_repl.py").write_text("def f(x):\n    return x + 1\n")
        sys.path.insert(0, tmp)
        patches.install(Config(patches=(PatchEntry("bench_target:f", "bench_repl:f", None, "bench"),)), "cpu")
        import bench_repl
        import bench_target
        from bench_target import f as patched

        assert patched is bench_repl.f and bench_target.f is bench_repl.f
        direct = bench_repl.f
        number = 500_000
        cases = {
            "direct": lambda: direct(1),
            "patched": lambda: patched(1),
            "attr": lambda: bench_target.f(1),
            "attr_base": lambda: bench_repl.f(1),
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for r in range(rounds * 2):  # interleaved, order rotated each round; min = least disturbed run
            keys = list(cases)[r % 4:] + list(cases)[: r % 4]
            for k in keys:
                times[k].append(timeit.timeit(cases[k], number=number))
        t = {k: min(v) for k, v in times.items()}
        patches.uninstall()
    return {
        "ratio_from_import": t["patched"] / t["direct"],
        "ratio_module_attr": t["attr"] / t["attr_base"],
        "direct_ns_per_call": t["direct"] / number * 1e9,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--modules", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    imp = bench_imports(args.rounds, args.modules)
    re_imp = bench_reimport(args.rounds, args.modules)
    bail = bench_bailout()
    call = bench_call(args.rounds)
    result = {**imp, **re_imp, "finder_bailout_us": bail, **call}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(textwrap.dedent(f"""\
        imports per run:           {imp['imports']} ({args.modules} generated + stdlib), {args.rounds} interleaved rounds, median
        without hook:              {imp['plain_us_per_import']:.1f} us/import
        with hook:                 {imp['hook_us_per_import']:.1f} us/import
        overhead:                  {imp['overhead_us_per_import']:+.2f} us/import, noise +-{imp['noise_us_per_import']:.1f} us   (goal < 2 us)
        re-import, one process:    {re_imp['reimport_plain_us']:.1f} -> {re_imp['reimport_hook_us']:.1f} us/import, overhead {re_imp['reimport_overhead_us']:+.2f} us
        finder bail-out alone:     {bail:.3f} us/call
        call, from X import f:     {call['ratio_from_import']:.3f} x direct   (goal 1.00 within noise; same object)
        call, X.f(...):            {call['ratio_module_attr']:.3f} x replacement_module.f(...)
        direct call:               {call['direct_ns_per_call']:.0f} ns"""))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _results

    _results.record("patches", {
        "import hook overhead per import (µs)": round(imp["overhead_us_per_import"], 2),
        "its noise (± µs)": round(imp["noise_us_per_import"], 1),
        "finder bail-out (µs per call)": round(bail, 3),
        "patched call via from X import f / direct": round(call["ratio_from_import"], 3),
        "patched call via X.f / replacement_module.f": round(call["ratio_module_attr"], 3)},
        goal="< 2 µs per import; a patched call costs what the replacement costs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
