"""`bash scripts/test --matrix PYTHON...`: the supported torch releases and builds, one environment each.

CI runs the whole suite on the pinned torch (2.13.0's CPU build); a CUDA build of the newest torch
costs a multi-GB download, so the other releases and builds are run here, by a developer, in
environments they made (a venv per torch, this checkout installed editable into each):

    bash scripts/test --matrix /work/venvs/tv-213cu/bin/python /work/venvs/tv-2141/bin/python ...

For each interpreter, from this checkout: the native core built against its torch, the README's main
command on the emulated device (`cudashim run examples/serve.py`), the same on the simulated NPU
(`--platform ascend --simulate`, with the torch-npu release that torch chooses), and SLICE, a
representative slice of the suite (unit, the emulated device, the simulated NPU, the serve example).
Each step's outcome, pytest's counts and the seconds it took are written to
benchmarks/results/torch_matrix.json (--out), with the torch and build of each environment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import commit, host  # noqa: E402

__all__ = ["SLICE", "main"]

#: the representative slice: everything of tests/unit, the emulated device's own tests (with its takeover
#: of a CUDA build's kernels, which only another torch's registrations can break, and its per-release list
#: of CUDA-only operators), the simulated NPU's device and serve tests, and the serve example end to end
SLICE = ("tests/unit", "tests/emulated/test_devices.py", "tests/emulated/test_semantics.py",
         "tests/emulated/test_memory.py", "tests/emulated/test_torch_build.py", "tests/emulated/test_cuda_only_ops.py",
         "tests/simulated/test_device.py",
         "tests/simulated/test_serve.py", "tests/cpu/test_serve_example.py")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env.pop("PYTHONPATH", None)
    env.setdefault("OMP_NUM_THREADS", "2")
    return env


def _run(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out = 124, f"timed out after {timeout:.0f} s: {exc.stdout or ''}{exc.stderr or ''}"
    return rc, out, round(time.monotonic() - t0, 1)


def _counts(out: str) -> dict[str, int]:
    tail = out.strip().splitlines()[-1] if out.strip() else ""
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", tail)}


def one(python: str, slice_: tuple[str, ...], timeout: float, slice_only: bool = False) -> dict[str, Any]:
    """Every step for one interpreter."""
    probe = ("import torch, json; from cudashim import _torch_compat as c; "
             "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
             "'cuda_build': c.cuda_build(torch), 'torch_npu': c.torch_npu_release(torch.__version__)}))")
    rc, out, _ = _run([python, "-c", probe], 300)
    entry: dict[str, Any] = {"python": python}
    if rc != 0:
        entry["error"] = out.strip().splitlines()[-1:] or [f"exit {rc}"]
        return entry
    entry.update(json.loads(out.strip().splitlines()[-1]))
    steps: dict[str, Any] = {}
    rc, out, s = _run([python, "-m", "cudashim.emulated"], 1800)
    steps["core_build"] = {"rc": rc, "seconds": s}
    if slice_only:
        return _slice(entry, steps, python, slice_, timeout)
    rc, out, s = _run([python, "-m", "cudashim", "run", "examples/serve.py"], timeout)
    m = re.search(r"serve: .*", out)
    steps["serve_cpu"] = {"rc": rc, "seconds": s, "line": m.group(0) if m else out.strip().splitlines()[-1:]}
    rc, out, s = _run([python, "-m", "cudashim", "run", "--platform", "ascend", "--simulate", "examples/serve.py"], timeout)
    m = re.search(r"serve: .*", out)
    ready = re.search(r".*torch_npu \d+\.\d+.*", out)
    steps["serve_simulated_npu"] = {"rc": rc, "seconds": s, "line": m.group(0) if m else out.strip().splitlines()[-1:],
                                    "readiness": ready.group(0).strip() if ready else None}
    return _slice(entry, steps, python, slice_, timeout)


def _slice(entry: dict[str, Any], steps: dict[str, Any], python: str, slice_: tuple[str, ...],
           timeout: float) -> dict[str, Any]:
    rc, out, s = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *slice_], timeout * 4)
    steps["slice"] = {"rc": rc, "seconds": s, "counts": _counts(out), "files": list(slice_),
                      "failures": [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))][:40]}
    entry["steps"] = steps
    entry["ok"] = all(v["rc"] == 0 for v in steps.values())
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/test --matrix", description=__doc__.split("\n\n")[0])
    ap.add_argument("pythons", nargs="*", help="interpreters of the environments, one torch each")
    ap.add_argument("--merge", nargs="*", default=[], help="results files of runs made elsewhere (other --out), added")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "torch_matrix.json"))
    ap.add_argument("--slice", nargs="*", default=list(SLICE), help="test files or folders (default: SLICE)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per program run (the slice: 4x)")
    ap.add_argument("--slice-only", action="store_true", help="the core and the slice, not the serve runs")
    a = ap.parse_args(argv)
    runs = []
    for python in a.pythons:
        print(f"scripts/test --matrix: {python}", file=sys.stderr)
        runs.append(one(python, tuple(a.slice), a.timeout, a.slice_only))
        print(json.dumps(runs[-1], indent=1), file=sys.stderr)
    for path in a.merge:
        runs += json.loads(Path(path).read_text()).get("runs", [])
    out = Path(a.out)
    previous = json.loads(out.read_text()).get("runs", []) if out.is_file() else []
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r.get("torch"), tuple(r.get("steps", {}).get("slice", {}).get("files", ()))

    seen = {key(r) for r in runs}
    kept = [r for r in previous if key(r) not in seen]  # one row per torch and slice: the newest run of it
    record = {"benchmark": "torch_matrix", "command": "bash scripts/test --matrix " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": host(), "commit": commit(),
              "runs": kept + runs}
    out.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
