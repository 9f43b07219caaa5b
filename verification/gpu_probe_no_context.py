"""Evidence, on an NVIDIA box, that hardware discovery creates no CUDA context.

    python3 verification/gpu_probe_no_context.py

1. runs accelerator_kind() and the NVML probe (discover_gpus: name, compute capability, NUMA);
2. right after, asks `nvidia-smi --query-compute-apps=pid` whether this pid holds a context, and
   whether libcuda is even mapped into the process (reported, not required: on the H200 with
   driver 580 it is mapped after the probe, cause not established — a mapped library is not a context);
3. then sets CUDA_VISIBLE_DEVICES="" in this same process, imports torch and prints
   torch.cuda.device_count(): 0 proves CUDA was first initialised after the probe (the runtime reads
   the variable once, at cuInit), i.e. the probe did not initialise it;
4. control, in a child process: cuInit first, then CUDA_VISIBLE_DEVICES="" -> the device count is
   unchanged, which shows step 3 would have caught a probe that initialised CUDA.

Prints one JSON object per step; exit status 0 when all the evidence holds. Not a pytest test
(not named bench_*, so benchmarks/run.py skips it): it needs a GPU and the lead runs it by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_CONTROL = r"""
import ctypes, os
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
os.environ["CUDA_VISIBLE_DEVICES"] = ""
n = ctypes.c_int()
cuda.cuDeviceGetCount(ctypes.byref(n))
print(n.value)
"""


def _emit(step: str, **fields: object) -> None:
    print(json.dumps({"step": step, **fields}, default=str), flush=True)


def _compute_app_pids() -> list[int] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    out = subprocess.run([exe, "--query-compute-apps=pid", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=60)
    return [int(line) for line in out.stdout.split() if line.strip().isdigit()]


def _libcuda_mapped() -> bool:
    with open("/proc/self/maps") as f:
        return any("libcuda.so" in line for line in f)


def main() -> int:
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    import cudashim.hardware as hw

    kind = hw.accelerator_kind()
    gpus = hw.discover_gpus()
    _emit("probe", pid=os.getpid(), kind=kind, gpus=[{f: getattr(g, f) for f in g.__slots__} for g in gpus],
          torch_imported="torch" in sys.modules)

    pids = _compute_app_pids()
    mapped = _libcuda_mapped()
    _emit("after_probe", compute_app_pids=pids, this_pid_listed=(pids is not None and os.getpid() in pids),
          libcuda_mapped=mapped)

    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch

    count = torch.cuda.device_count()
    _emit("torch_after_hiding", torch=torch.__version__, cuda_visible_devices="", device_count=count)

    # the control must start with every device visible (this process has hidden them by now)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    control = subprocess.run([sys.executable, "-c", _CONTROL], capture_output=True, text=True, timeout=120, env=env)
    control_count = int(control.stdout.strip()) if control.returncode == 0 else None
    _emit("control_init_first", device_count=control_count, stderr=control.stderr.strip()[-300:])

    ok = (
        kind == "nvidia"
        and bool(gpus)
        and all(g.compute_capability is not None for g in gpus)
        and not (pids and os.getpid() in pids)
        and count == 0
        and bool(control_count)
    )
    _emit("verdict", no_context_created=ok)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
