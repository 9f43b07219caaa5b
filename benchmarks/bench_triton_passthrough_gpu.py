"""On an NVIDIA GPU the Triton route is not installed: a Triton kernel under the shim is Triton's own.

    python3 benchmarks/bench_triton_passthrough_gpu.py [--rounds 5] [--launches 2000] [--out PATH]

Each round starts two fresh processes, shim off (CUDASHIM_DISABLE=1) and shim on (`python -m cudashim run
--platform nvidia`), in alternating order. Each checks that JITFunction.run is Triton's own function, that
triton.runtime.driver.active is Triton's CUDA driver, that the launch returns a compiled kernel with its
register count and computes x + y exactly; then times --launches back-to-back launches of the tutorial's
vector add (host-bound: 4096 elements) after a warm-up. The figure is the median over rounds of the
launch-rate ratio on / off. Goal: 1.0 within noise (the route adds nothing on nvidia).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "triton_passthrough_gpu.json"

WORKER = r'''
import json, sys, time
import torch, triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

launches = int(sys.argv[1])
from triton.runtime.jit import JITFunction
run = JITFunction.__dict__["run"]
drv = triton.runtime.driver.active
x = torch.rand(4096, device="cuda"); y = torch.rand(4096, device="cuda"); out = torch.empty_like(x)
grid = (triton.cdiv(4096, 1024),)
k = add_kernel[grid](x, y, out, 4096, BLOCK_SIZE=1024)
torch.cuda.synchronize()
info = {"run_module": run.__module__, "run_qualname": run.__qualname__, "driver": type(drv).__name__,
        "n_regs": getattr(k, "n_regs", None), "exact": bool(torch.equal(out, x + y)),
        "triton": triton.__version__, "torch": torch.__version__, "shim_loaded": "cudashim" in sys.modules}
for _ in range(200):
    add_kernel[grid](x, y, out, 4096, BLOCK_SIZE=1024)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(launches):
    add_kernel[grid](x, y, out, 4096, BLOCK_SIZE=1024)
torch.cuda.synchronize()
info["launches_per_s"] = launches / (time.perf_counter() - t0)
print(json.dumps(info))
'''


def _one(shim: bool, script: str, launches: int) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if shim:
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "nvidia", script, str(launches)]
    else:
        env["CUDASHIM_DISABLE"] = "1"
        cmd = [sys.executable, script, str(launches)]
    p = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        raise SystemExit(f"worker ({'shim on' if shim else 'shim off'}) failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def check(info: dict) -> list[str]:
    """What must hold with the shim on as off: Triton's own launch, its CUDA driver, a compiled kernel."""
    bad = []
    if info["run_module"] != "triton.runtime.jit" or info["run_qualname"] != "JITFunction.run":
        bad.append(f"JITFunction.run is {info['run_module']}.{info['run_qualname']}, not Triton's")
    if info["driver"] != "CudaDriver":
        bad.append(f"driver.active is {info['driver']}")
    if not isinstance(info["n_regs"], int) or not info["exact"]:
        bad.append(f"launch: n_regs={info['n_regs']!r}, exact={info['exact']}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "triton_worker.py")  # @triton.jit needs its source in a file
        Path(script).write_text(WORKER)
        ratios, infos = [], {}
        for r in range(a.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {shim: _one(shim, script, a.launches) for shim in order}
            infos = got
            ratios.append(got[True]["launches_per_s"] / got[False]["launches_per_s"])
    problems = check(infos[True]) + check(infos[False])
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _results import record

    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    record("triton_passthrough_gpu", {
        "shim on / off, launches/s, median of per-round ratios": round(statistics.median(ratios), 3),
        "spread: min, q1, q3, max": [round(min(ratios), 3), round(q[0], 3), round(q[2], 3), round(max(ratios), 3)],
        "rounds": a.rounds, "shim on": infos[True], "shim off": infos[False], "problems": problems},
        goal="1.0 within noise; Triton's own JITFunction.run and CUDA driver with the shim on",
        out=a.out)
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
