"""CUDA itself as the oracle: the emulated device's check files run on a real GPU with the shim off.

    python verification/cuda_oracle.py            # on a machine with an NVIDIA GPU and a CUDA torch

Each check file (tests/emulated/checks.py, graph_checks.py, subject_checks.py, memory_checks.py,
compile_checks.py, sync_checks.py, attention_program_checks.py) states a
CUDA behaviour the emulated device claims; CI runs them on the device, and this runs them on CUDA in
fresh interpreters with CUDASHIM_DISABLE=1. Writes benchmarks/results/cuda_oracle.json: per file, the
checks that passed and the ones that did not, with their first line of detail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "benchmarks")]  # _results: the one writer of results files
import _results  # noqa: E402

FILES = ("checks", "graph_checks", "subject_checks", "memory_checks", "compile_checks", "sync_checks",
         "attention_program_checks")


def main() -> int:
    env = {**os.environ, "CUDASHIM_DISABLE": "1", "PYTHONPATH": str(REPO)}
    figures: dict[str, object] = {}
    rows = []
    for name in FILES:
        r = subprocess.run([sys.executable, str(REPO / "tests" / "emulated" / "_runner.py"), name], env=env,
                           capture_output=True, text=True, timeout=900)
        try:
            results = json.loads(r.stdout)["results"]
        except (ValueError, KeyError):
            figures[name] = f"did not run (rc {r.returncode}): {r.stderr.strip().splitlines()[-1:] or ''}"
            continue
        bad = {k: v["detail"].strip().splitlines()[0][:200] if v["detail"].strip() else "" for k, v in results.items()
               if not v["ok"]}
        figures[name] = f"{len(results) - len(bad)} / {len(results)}"
        rows += [[name, k, why] for k, why in bad.items()]
        print(f"{name}: {figures[name]} pass" + "".join(f"\n  FAIL {k}: {why}" for k, why in bad.items()))
    import torch  # noqa: F401  (imported, so the host record names the torch it ran on)

    _results.record("cuda_oracle", figures, goal="every check passes on CUDA itself",
                    table={"columns": ["file", "check", "why it failed on CUDA"], "rows": rows} if rows else None)
    return 0 if not rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
