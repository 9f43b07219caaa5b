"""Start-up of the simulated NPU: this checkout against a baseline commit, measured in the same run.

    python benchmarks/bench_npu_startup.py --baseline <commit> [--rounds N]

Each round starts `python -m cudashim run --platform ascend --simulate -c "import torch, torch_npu"`
once from this checkout and once from the baseline commit (extracted with `git archive` into a
temporary folder; its simulated torch_npu assembled before the first round), interleaved so that
the machine's load drifts into both alike. The figure is the median of per-round ratios
(this / baseline); the goal is at most 1.5 (the whole wheel's package imports more than the
stand-ins it replaced). The CPU time the run's processes used (user + system, from the children's
resource usage) is reported beside the wall time: on a shared machine it is the less disturbed of the two.

The baseline the issue asks for is the stand-ins' era: 9b0d015 is the last commit whose simulated
torch_npu was the project's own stand-ins around a dozen of the wheel's files.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import record  # noqa: E402

CODE = "import torch, torch_npu; torch.ones(1, device='npu')"


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _once(checkout: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one start-up from `checkout`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDASHIM_", "ASCEND_RT_"))}
    for keep in ("CUDASHIM_BUILD_DIR", "CUDASHIM_WHEEL_CACHE"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    env.update(PYTHONPATH=str(checkout), OMP_NUM_THREADS="1")
    t0, c0 = time.perf_counter(), _cpu()
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "ascend", "--simulate", "-c", CODE],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
    took, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: the simulated NPU did not start:\n{proc.stderr[-2000:]}")
    return took, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the commit to compare with (e.g. main before the change)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        _once(base), _once(ROOT)  # each assembles its simulated torch_npu and builds nothing else after
        times: dict[str, list[float]] = {"baseline": [], "this": []}
        cpus: dict[str, list[float]] = {"baseline": [], "this": []}
        ratios, cpu_ratios = [], []
        for i in range(args.rounds):
            order = (("baseline", base), ("this", ROOT)) if i % 2 == 0 else (("this", ROOT), ("baseline", base))
            got = {name: _once(path) for name, path in order}
            for name, (t, c) in got.items():
                times[name].append(t)
                cpus[name].append(c)
            ratios.append(got["this"][0] / got["baseline"][0])
            cpu_ratios.append(got["this"][1] / got["baseline"][1])
            print(f"round {i}: baseline {got['baseline'][0]:.2f} s ({got['baseline'][1]:.2f} s CPU), "
                  f"this {got['this'][0]:.2f} s ({got['this'][1]:.2f} s CPU)", flush=True)
    med = statistics.median
    figures = {
        "start-up, baseline (median s)": round(med(times["baseline"]), 3),
        "start-up, this checkout (median s)": round(med(times["this"]), 3),
        "this / baseline (median of per-round ratios)": round(med(ratios), 3),
        "CPU time, baseline (median s)": round(med(cpus["baseline"]), 3),
        "CPU time, this checkout (median s)": round(med(cpus["this"]), 3),
        "CPU time, this / baseline (median of per-round ratios)": round(med(cpu_ratios), 3),
    }
    print(figures)
    record("npu_startup", figures, goal="this / baseline <= 1.5",
           note=f"{args.rounds} interleaved rounds; baseline {args.baseline}; program: {CODE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
