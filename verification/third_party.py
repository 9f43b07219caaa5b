"""Third-party code on the emulated CUDA device: other projects' own CUDA-selecting
test suites and unmodified CUDA-written programs, each against its own CPU run.

    python verification/third_party.py --setup                  # pip: pinned subjects (+ tensorboard) + their sdists
    python verification/third_party.py suites --sources DIR [NAME ...]   # minutes each (one at a time)
    python verification/third_party.py programs --sources DIR [NAME ...]

Suites (`third_party_subjects.SUITES`): the test files of each pinned sdist are copied into a fresh
folder and run twice with pytest — plain torch on the CPU (CUDA absent, so the suite takes its CPU
path or skips its CUDA cases), then under `python -m cudashim run
--platform cpu -m pytest` (CUDA present: the emulated device). A suite whose sdist ships no tests
(`Suite.repo`) takes them from DIR/<repo>, a checkout of its repository, at the pinned commit (`git
archive`). Printed per suite: passed / failed / skipped of each run, the ratio of passes (CUDA run over
CPU run; the goal is ≥ 0.99), and how many tests of the CUDA run skipped for want of CUDA (goal 0).

Programs (`third_party_subjects.PROGRAMS`): DIR holds checkouts of the repositories in
`third_party_subjects.REPOS` at the pinned commits (`git clone URL DIR/NAME && git -C DIR/NAME checkout
COMMIT`); the program's folder is copied to a scratch folder per run, so the checkout stays clean.
Each runs once with plain torch and its CPU option, once under the shim with its CUDA option; the
figures it prints (losses, perplexities, scores, generated text) are compared — exactly unless the
program states a tolerance and why. A program with no CPU run by its own options (the DDP examples)
runs under the shim only and must print the lines it expects and exit 0.

Both runs use one intra-op thread (OMP_NUM_THREADS=1): the CPU kernels then reduce in one order in
both runs. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
import _results  # noqa: E402
from third_party_subjects import PROGRAM_PINS, PROGRAMS, REPOS, SUITES, Program, Suite, figures  # noqa: E402

__all__ = ["main"]

CACHE = Path(os.environ.get("CUDASHIM_THIRDPARTY_CACHE", Path.home() / ".cache" / "cudashim" / "thirdparty"))
ROOT = Path(__file__).resolve().parents[1]
SHIM = ("-m", "cudashim", "run", "--platform", "cpu")
GOAL = 0.99
_CUDA_WORDS = ("cuda", "gpu")


def _env(shim: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if shim:
        env["CUDASHIM_CPU_DEVICES"] = os.environ.get("CUDASHIM_CPU_DEVICES", "1")
        # the runs' cwd is a scratch folder: `-m cudashim` must find this checkout's package
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    else:
        env["CUDASHIM_DISABLE"] = "1"  # plain torch, even with the repository on PYTHONPATH
    env.update(extra or {})
    return env


def setup() -> None:
    """Installs the pinned suites and what the programs import (after torch, which they find already
    installed) and fetches the suites' sdists."""
    pins = [s.pin for s in SUITES]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *pins, *PROGRAM_PINS], check=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    for pin in (s.pin for s in SUITES if not s.repo):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "-d", str(CACHE), pin], check=True)


def _sdist(suite: Suite) -> Path:
    found = sorted(CACHE.glob(f"{suite.sdist_dir}.tar.gz")) + sorted(CACHE.glob(f"{suite.sdist_dir.replace('-', '_', 1)}.tar.gz"))
    if not found:
        raise SystemExit(f"third_party: no sdist of {suite.pin} in {CACHE}; run `python {sys.argv[0]} --setup`")
    return found[0]


def _junit_counts(path: Path) -> dict[str, object]:
    passed = failed = skipped = 0
    cuda_skips: list[str] = []
    failures: list[str] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        if case.find("skipped") is not None:
            skipped += 1
            msg = (case.find("skipped").get("message") or "").lower()
            if any(w in msg for w in _CUDA_WORDS):
                cuda_skips.append(f"{tid}: {msg}")
        elif case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            failures.append(f"{tid}: {(bad.get('message') or '').splitlines()[0][:200] if bad.get('message') else ''}")
        else:
            passed += 1
    return {"passed": passed, "failed": failed, "skipped": skipped, "cuda_skips": cuda_skips, "failures": failures}


def _repo_tree(suite: Suite, sources: Path | None, dest: Path) -> Path:
    """The suite's files from its repository at the pinned commit, exported under dest."""
    url, commit = REPOS[suite.repo]
    src = (sources / suite.repo) if sources else None
    if src is None or not (src / ".git").exists():
        raise SystemExit(f"third_party: suite {suite.name} needs --sources DIR with DIR/{suite.repo} a checkout "
                         f"of {url} (`git clone {url} DIR/{suite.repo}`; commit {commit} is exported from it)")
    dest.mkdir(parents=True)
    paths = sorted({Path(rel).parts[0] for rel in suite.tests} | set(suite.files))
    archive = subprocess.run(["git", "-C", str(src), "archive", commit, *paths], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"third_party: `git -C {src} archive {commit}` failed ({archive.stderr.decode().strip()}); "
                         f"fetch the commit: `git -C {src} fetch origin {commit}`")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def run_suite(suite: Suite, timeout: float, sources: Path | None = None) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix=f"tp-{suite.name}-") as tmp:
        root = Path(tmp)
        work = root / "run"  # the test folders alone: the installed package is the one under test
        if suite.repo:
            _repo_tree(suite, sources, work)
        else:
            with tarfile.open(_sdist(suite)) as tf:
                tf.extractall(root / "sdist", filter="data")
            for top in sorted({Path(rel).parts[0] for rel in suite.tests}):  # whole folders: helpers, conftest
                shutil.copytree(root / "sdist" / suite.sdist_dir / top, work / top)
        for mode, shim in (("cpu", False), ("cuda", True)):
            xml = root / f"{mode}.xml"
            cmd = [sys.executable, *(SHIM if shim else ()), "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   f"--junitxml={xml}", *(suite.cuda_args if shim else suite.cpu_args), *suite.tests]
            t0 = time.perf_counter()
            try:
                subprocess.run(cmd, cwd=work, env=_env(shim), timeout=timeout, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pass
            counts = _junit_counts(xml) if xml.is_file() else {"passed": 0, "failed": 0, "skipped": 0,
                                                                "cuda_skips": [], "failures": ["(no result)"]}
            counts["seconds"] = round(time.perf_counter() - t0)
            out[mode] = counts
    return out


def _prepare(program: Program, sources: Path, run_dir: Path) -> None:
    src = sources / program.repo
    if not src.is_dir():
        url, commit = REPOS[program.repo]
        raise SystemExit(f"third_party: {src} missing; `git clone {url} {src} && git -C {src} checkout {commit}`")
    if not run_dir.exists():
        shutil.copytree(src / program.folder if program.folder != "." else src, run_dir,
                        ignore=shutil.ignore_patterns(".git"))
    if program.make_data:
        program.make_data(run_dir)


def run_program(program: Program, sources: Path, scratch: Path, timeout: float) -> dict[str, object]:
    res: dict[str, object] = {}
    for mode, shim in (("cpu", False), ("cuda", True)):
        if not shim and program.cpu_args is None:
            continue  # no CPU run by the program's own options: its CUDA run is held to `expect`
        owner = program.after or program.name
        run_dir = scratch / f"{mode}-{owner}".replace(" ", "_").replace("/", "_")
        _prepare(program, sources, run_dir)
        cmd = [sys.executable, *(SHIM if shim else ()), *program.argv,
               *(program.cuda_args if shim else program.cpu_args)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=run_dir, env=_env(shim, program.env), timeout=timeout,
                               capture_output=True, text=True)
            rc, text = p.returncode, p.stdout
            if program.output_file and (run_dir / program.output_file).is_file():
                text += (run_dir / program.output_file).read_text()
            (scratch / f"{mode}-{program.name}.log".replace(" ", "_").replace("/", "_")).write_text(p.stdout + p.stderr)
        except subprocess.TimeoutExpired:
            rc, text = "timeout", ""
        res[mode] = {"rc": rc, "figures": figures(program, text), "seconds": round(time.perf_counter() - t0)}
    return res


def _close(a: str, b: str, rtol: float) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= rtol * max(abs(x), abs(y))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", choices=("suites", "programs"), help="what to run")
    ap.add_argument("names", nargs="*", help="subjects by (start of) name; default: all")
    ap.add_argument("--setup", action="store_true", help="install the pinned suites and fetch their sdists")
    ap.add_argument("--sources", type=Path, help="folder with the programs' (and repo-sourced suites') repositories (see REPOS)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run (default 1800)")
    args = ap.parse_intermixed_args(argv)
    if args.setup:
        setup()
    if not args.what:
        return 0
    ok = True
    rows: list[list[object]] = []
    if args.what == "suites":
        for suite in SUITES:
            if args.names and not any(suite.name.startswith(n) for n in args.names):
                continue
            r = run_suite(suite, args.timeout, args.sources.resolve() if args.sources else None)
            cpu, cuda = r["cpu"], r["cuda"]
            ratio = cuda["passed"] / cpu["passed"] if cpu["passed"] else 0.0
            ok &= ratio >= GOAL and not cuda["cuda_skips"]
            where = f"{REPOS[suite.repo][0]} @ {REPOS[suite.repo][1][:12]}" if suite.repo else "sdist"
            print(f"{suite.name} ({suite.pin}, tests from {where}; {' '.join(suite.tests)}; CUDA: {suite.how_cuda})")
            for mode, c in (("cpu", cpu), ("cuda-under-shim", cuda)):
                print(f"  {mode:16} passed {c['passed']:4}  failed {c['failed']:3}  skipped {c['skipped']:3}"
                      f"  (for want of CUDA: {len(c['cuda_skips'])})  {c['seconds']} s")
            print(f"  ratio of passes {ratio:.3f}")
            only_cuda = sorted(set(cuda["failures"]) - set(cpu["failures"]))
            rows.append([f"{suite.name} {suite.pin}: {' '.join(suite.tests)} ({where})",
                         *(f"{c['passed']} / {c['failed']} / {c['skipped']}" for c in (cpu, cuda)),
                         round(ratio, 3), len(cuda["cuda_skips"]), "; ".join(only_cuda[:5]) or "none",
                         f"{_results.commit()} {time.strftime('%Y-%m-%d', time.gmtime())}"])
            for line in cuda["failures"][:20] + cuda["cuda_skips"][:5]:
                print(f"    {line}")
            sys.stdout.flush()
    else:
        if not args.sources:
            ap.error("programs need --sources DIR (checkouts of " + ", ".join(f"{k} {u}@{c[:12]}" for k, (u, c) in REPOS.items()) + ")")
        scratch = Path(tempfile.mkdtemp(prefix="tp-programs-"))
        for program in PROGRAMS:
            if args.names and not any(program.name.startswith(n) for n in args.names):
                continue
            r = run_program(program, args.sources.resolve(), scratch, args.timeout)
            cuda = r["cuda"]
            if program.cpu_args is None:
                same = cuda["rc"] == 0 and sorted(cuda["figures"]) == sorted(program.expect)
                ok &= same
                print(f"{program.name}: {'OK' if same else 'FAILED'} (no CPU run; the lines expected); rc "
                      f"{cuda['rc']}, {len(cuda['figures'])} of {len(program.expect)} lines, {cuda['seconds']} s",
                      flush=True)
                rows.append([program.name, "no CPU run", len(cuda["figures"]), "expected lines" if same else "FAILED"])
                continue
            cpu = r["cpu"]
            same = (cpu["rc"] == 0 and cuda["rc"] == 0 and cpu["figures"] and len(cpu["figures"]) == len(cuda["figures"])
                    and all(_close(a, b, program.rtol) for a, b in zip(cpu["figures"], cuda["figures"])))
            ok &= bool(same)
            tol = f"within rtol {program.rtol} ({program.why_rtol})" if program.rtol else "exactly equal"
            print(f"{program.name}: {'OK' if same else 'DIFFER'} ({tol}); rc cpu {cpu['rc']} / cuda {cuda['rc']}, "
                  f"{len(cpu['figures'])} figures, {cpu['seconds']} s / {cuda['seconds']} s")
            def show(f: list[str]) -> str:
                return " ".join(x.strip()[:40].replace("\n", "⏎") for x in (f[:3] + ["…"] + f[-3:] if len(f) > 6 else f))
            print(f"  cpu  {show(cpu['figures'])}\n  cuda {show(cuda['figures'])}", flush=True)
            rows.append([program.name, len(cpu["figures"]), len(cuda["figures"]), ("equal, " + tol) if same else "DIFFER"])
        print(f"logs in {scratch}")
    if args.what == "suites" and rows:
        _record_suites(rows)
    elif rows and not args.names:  # a partial run does not replace the whole table
        _results.record("third_party_programs", {"all equal": ok}, table={
            "columns": ["program", "CPU figures", "CUDA figures", "outcome"], "rows": rows}, goal="every program's figures equal")
    return 0 if ok else 1


SUITE_COLUMNS = ["suite: tests (from)", "CPU: passed / failed / skipped", "CUDA under the shim", "ratio of passes",
                 "skipped for want of CUDA", "failed on CUDA only", "measured at"]


def _record_suites(rows: list[list[object]]) -> None:
    """Each suite's row replaces its own in the table (a suite takes minutes: they run one at a time);
    rows of another layout, or of suites no longer in SUITES, are dropped."""
    path = _results.RESULTS / "third_party_suites.json"
    names = [s.name for s in SUITES]
    key = lambda row: str(row[0]).split(" ", 1)[0]  # noqa: E731
    old: list[list[object]] = []
    if path.is_file():
        table = json.loads(path.read_text()).get("table") or {}
        if table.get("columns") == SUITE_COLUMNS:
            old = table["rows"]
    merged = {key(r): r for r in old if key(r) in names} | {key(r): r for r in rows}
    ordered = [merged[n] for n in names if n in merged]
    missing = [n for n in names if n not in merged]
    ratios = {key(r): r[3] for r in ordered}
    met = not missing and all(r[3] >= GOAL and r[4] == 0 for r in ordered)
    _results.record("third_party_suites", {"suites at goal": f"{sum(r[3] >= GOAL and r[4] == 0 for r in ordered)} of {len(names)}",
                                           **{f"ratio {n}": v for n, v in ratios.items()}, "goal met": met},
                    table={"columns": SUITE_COLUMNS, "rows": ordered},
                    goal=f"each suite at least {GOAL} of its CPU run's passes, none skipped for want of CUDA",
                    note=("Each row is measured by `python verification/third_party.py suites --sources DIR NAME` at the commit and date "
                          "it names; the command below is the last such run." + (f" Not yet measured: {', '.join(missing)}." if missing else "")))


if __name__ == "__main__":
    raise SystemExit(main())
