"""CUDA's sync-debug answer per argument class of the operators that synchronize for some arguments only
(index_put_ with a mask or integer indices, a value on the host or the device, accumulate or not;
indexing; masked_fill and index_fill's values; repeat_interleave), written as plain CUDA code.

Each check runs one class of verification/sync_debug_classes.py under `torch.cuda.set_sync_debug_mode("error")`,
with deterministic algorithms off and on, and asserts what the synchronizing table's "classes"
(cudashim/emulated/synchronizing.json) says CUDA did, as measured on a GPU. The same file runs on the
emulated device (test_sync_classes.py) and on CUDA itself with the shim off (verification/cuda_oracle.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "verification"))
try:
    from sync_debug_classes import TABLE, classes, synchronizes
finally:
    sys.path.remove(str(ROOT / "verification"))

MEASURED: dict[str, dict] = json.loads(TABLE.read_text()).get("classes", {})
CHECKS: dict[str, Callable[[], None]] = {}


def _check(name: str, want: dict) -> Callable[[], None]:
    def run() -> None:
        op, call = classes(torch)[name]
        assert op == want["operator"], (op, want["operator"])
        for deterministic in (False, True):
            expected = want.get("synchronizes_deterministic", want["synchronizes"]) if deterministic else want["synchronizes"]
            got = synchronizes(torch, call, deterministic)
            assert got == expected, (f"{name} ({op}, deterministic algorithms {'on' if deterministic else 'off'}): "
                                     f"{'synchronized' if got else 'did not synchronize'}; CUDA "
                                     f"{'does' if expected else 'does not'}")

    run.__name__ = f"sync_class_{name}"
    return run


for _name, _want in MEASURED.items():
    CHECKS[f"sync_class_{_name}"] = _check(_name, _want)
