"""The emulated device (or the simulated NPU) against the CPU over PyTorch's operator database.

    python verification/opdb_sweep.py                                  # every OpInfo, every sample, fwd+bwd+errors
    python verification/opdb_sweep.py --ops 'nn.functional.conv*' --samples 3 --dtypes float32 bfloat16
    python verification/opdb_sweep.py --device npu                     # the simulated NPU
    python verification/opdb_sweep.py --jobs 2 --out benchmarks/results/opdb_cuda.json
    python verification/opdb_sweep.py --ops 'zeros_like' --update benchmarks/results/opdb_cuda.json

Each OpInfo of `torch.testing._internal.common_methods_invocations.op_db` runs, for every dtype the CPU
supports, its sample inputs forward and (where it supports autograd) backward, on the device and on CPU
tensors in one process, and its error inputs on the device (`opdb_cases.py` says what is compared and the
outcome codes). Workers run under `python -m cudashim run` (`--platform cpu` for `cuda`, `--platform ascend
--simulate` for `npu`), a chunk of ops each; a worker that dies (a crash, an abort, a hang past --timeout)
is reported against the op it was running and a new worker takes the next op, so one bad case never ends
the sweep. Workers use one intra-op thread.

Written: a JSON table (command, date, host, commit, torch, options; per op and dtype and mode a string of
outcome codes, one per sample; every case not equal with its detail; summary per mode) to --out. With
--update FILE the selected ops are run again and their rows replace theirs in FILE (the summary recounted
from its table; the run listed under `updates`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "benchmarks")]  # _results: the one writer of results files
from opdb_cases import CODES, summarize  # noqa: E402

__all__ = ["main", "sweep"]

PLATFORM = {"cuda": ("--platform", "cpu"), "npu": ("--platform", "ascend", "--simulate")}


def _worker(argv: list[str]) -> int:
    """Inside the shimmed process: run the named ops, one JSON line per case, flushed as it goes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--device")
    ap.add_argument("--modes")
    ap.add_argument("--dtypes", default="")
    ap.add_argument("--samples", type=int, default=0)
    ap.add_argument("--ops-file")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from opdb_cases import op_names, run_op, select_ops

    names = Path(a.ops_file).read_text().split("\n")
    by_name = {op_names(op): op for op in select_ops()}
    with open(a.out, "a", buffering=1) as f:
        for name in names:
            if not name:
                continue
            f.write(json.dumps({"start": name}) + "\n")
            t = time.perf_counter()
            for case in run_op(by_name[name], a.device, a.modes.split(","), [d for d in a.dtypes.split(",") if d],
                               a.samples or None):
                f.write(json.dumps(case.row()) + "\n")
            f.write(json.dumps({"end": name, "s": round(time.perf_counter() - t, 3)}) + "\n")
    return 0


def _chunk(names: list[str], opts: argparse.Namespace, log: Any) -> list[dict[str, Any]]:
    """Run names in workers until each has ended or been reported as the op its worker died in."""
    rows: list[dict[str, Any]] = []
    todo = list(names)
    env = {k: v for k, v in os.environ.items() if k != "CUDASHIM_DISABLE"}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    if opts.device == "npu":
        # op_db compares torch.cuda.get_device_capability() with a tuple while it is imported; under
        # transfer_to_npu that is torch.npu's, None unless this variable names one (as torch_npu answers).
        # The value picks only op_db's CUDA-only dtype lists, which the sweep does not use.
        env.setdefault("TORCH_NPU_DEVICE_CAPABILITY", "8.0")
    while todo:
        with tempfile.TemporaryDirectory() as tmp:
            ops_file, out = Path(tmp) / "ops", Path(tmp) / "out.jsonl"
            ops_file.write_text("\n".join(todo))
            cmd = [sys.executable, "-m", "cudashim", "run", *PLATFORM[opts.device], str(Path(__file__).resolve()),
                   "--worker", "--device", opts.device, "--modes", ",".join(opts.modes), "--dtypes",
                   ",".join(opts.dtypes or []), "--samples", str(opts.samples or 0), "--ops-file", str(ops_file),
                   "--out", str(out)]
            budget = opts.timeout * len(todo) + 120
            try:
                proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=budget)
                rc, err = proc.returncode, proc.stderr
            except subprocess.TimeoutExpired as e:
                rc, err = "timeout", (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            done, current = set(), None
            for line in out.read_text().splitlines() if out.exists() else []:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if "start" in r:
                    current = r["start"]
                elif "end" in r:
                    done.add(r["end"])
                    current = None
                    log.write(f"{r['end']} {r['s']}s\n")
                else:
                    rows.append(r)
            if rc == 0 and current is None:
                todo = [n for n in todo if n not in done]
                if todo:  # the worker exited cleanly without running them: nothing more to learn
                    rows += [_died(n, f"not run (worker exit {rc})") for n in todo]
                break
            dead = current if current is not None else next((n for n in todo if n not in done), None)
            if dead is None:
                break
            rows.append(_died(dead, f"worker ended ({rc}) in this op: {err.strip()[-1200:]}"))
            log.write(f"{dead} died: {rc}\n")
            todo = [n for n in todo if n not in done and n != dead]
    return rows


def _died(name: str, detail: str) -> dict[str, Any]:
    return {"op": name, "dtype": "-", "mode": "process", "sample": -1, "code": "D", "detail": detail}


def sweep(opts: argparse.Namespace, log: Any = sys.stderr) -> dict[str, Any]:
    from opdb_cases import op_names, select_ops

    names = [op_names(op) for op in select_ops(opts.ops)]
    chunks = [names[i:i + opts.chunk] for i in range(0, len(names), opts.chunk)]
    t = time.perf_counter()
    with ThreadPoolExecutor(opts.jobs) as pool:
        parts = list(pool.map(lambda c: _chunk(c, opts, log), chunks))
    rows = [r for p in parts for r in p]
    table: dict[str, dict[str, dict[str, str]]] = {}
    for r in sorted(rows, key=lambda r: (r["op"], r["dtype"], r["mode"], r["sample"])):
        table.setdefault(r["op"], {}).setdefault(r["dtype"], {}).setdefault(r["mode"], "")
        table[r["op"]][r["dtype"]][r["mode"]] += r["code"]
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "commit": _commit(),
        "torch": _torch_version(),
        "device": opts.device,
        "options": {"ops": opts.ops, "dtypes": opts.dtypes, "samples": opts.samples, "modes": opts.modes,
                    "ran": names},
        "ops": len(names),
        "seconds": round(time.perf_counter() - t, 1),
        "codes": CODES,
        "summary": summarize(rows),
        "table": table,
        "not_equal": [r for r in rows if r["code"] not in ("=", "r")],
    }


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def _torch_version() -> str:
    code = "import torch; print(torch.__version__)"
    env = dict(os.environ, CUDASHIM_DISABLE="1")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip()


def _update(path: Path, part: dict[str, Any]) -> dict[str, Any]:
    """The table in `path` with the ops of `part` (a run of some ops) replaced by part's rows."""
    full = json.loads(path.read_text())
    ran = set(part["table"]) | {r["op"] for r in part["not_equal"]}
    ran |= set(part["options"]["ran"])
    for name in ran:
        full["table"].pop(name, None)
    full["table"].update(part["table"])
    full["table"] = dict(sorted(full["table"].items()))
    full["not_equal"] = [r for r in full["not_equal"] if r["op"] not in ran] + part["not_equal"]
    rows = [{"mode": mode, "code": code} for by_dtype in full["table"].values() for by_mode in by_dtype.values()
            for mode, codes in by_mode.items() for code in codes]
    full["summary"] = summarize(rows)
    full.setdefault("updates", []).append({k: part[k] for k in ("command", "date", "commit", "seconds")} |
                                          {"ops": sorted(part["options"]["ran"])})
    return full


def _record_summary(result: dict[str, Any], device: str, out: Path) -> None:
    """The figures the docs quote: opdb_summary.py's digest (its one writer), and the cases not equal by
    mode, code and operator."""
    import _results
    import opdb_summary

    opdb_summary.write(result, out)
    counts: dict[tuple[str, str, str], int] = {}
    for r in result["not_equal"]:
        key = (r["mode"], r["code"], r["op"])
        counts[key] = counts.get(key, 0) + 1
    rows = [[m, c, op, n] for (m, c, op), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    _results.record(f"opdb_{device}_remaining", {}, note="every case not equal (codes: see docs/operator-coverage.md)",
                    table={"columns": ["mode", "code", "op", "cases"], "rows": rows})


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=sorted(PLATFORM), default="cuda")
    ap.add_argument("--ops", nargs="*", help="fnmatch patterns over OpInfo names (name.variant); all when absent")
    ap.add_argument("--dtypes", nargs="*", help="dtype names (float32 bfloat16 ...); every dtype the CPU supports when absent")
    ap.add_argument("--samples", type=int, default=0, help="at most this many sample inputs per op, dtype and pass (0: all)")
    ap.add_argument("--modes", nargs="*", default=["forward", "backward", "error"],
                    choices=["forward", "backward", "error", "sparse", "graph", "meta"])
    ap.add_argument("--jobs", type=int, default=1, help="workers at once")
    ap.add_argument("--chunk", type=int, default=40, help="ops per worker")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per op before its worker is declared hung")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--update", type=Path, default=None,
                    help="a table of a full run: run the selected ops again and replace their rows in it")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return _worker(argv[1:])
    opts = parse(argv)
    result = sweep(opts)
    if opts.update is not None:
        result = _update(opts.update, result)
        opts.out = opts.update
    out = opts.out or ROOT / "benchmarks" / "results" / f"opdb_{opts.device}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    if out.resolve() == (ROOT / "benchmarks" / "results" / f"opdb_{opts.device}.json").resolve():
        _record_summary(result, opts.device, out)
    for mode, m in result["summary"].items():
        print(f"{mode:10s} cases {m['cases']:7d}  equal {m['equal_share']}  {m['codes']}")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
