"""Run the idiom table in one interpreter started by `python -m cudashim run --platform cpu`.

Every CPU-written version runs first on plain torch (the device taken off), then every
CUDA-written version with the emulated device back on; each result is compared with its CPU twin.
Prints one JSON object: {"shim_was_on": bool, "results": {name: {"ok": bool, "detail": str}}}.
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402  - the import hook installs the emulated device here

from cudashim import installers  # noqa: E402

warnings.filterwarnings("ignore")


def _run(fn: Any) -> tuple[bool, Any]:
    torch.manual_seed(0)
    try:
        return True, fn()
    except Exception as exc:  # the comparison reports it
        return False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"


def _kind(t: Any) -> str:
    """A CUDA-written result on the accelerator (cuda, or the simulated npu) stands for its CPU twin's
    result on the host; any other device type must match."""
    return "host" if t.device.type in ("cpu", "cuda", "npu") else t.device.type


def _same(a: Any, b: Any, tol: float | None, path: str = "") -> str | None:
    """None when a and b agree; else where and how they differ."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if _kind(a) != _kind(b) or a.dtype != b.dtype or a.shape != b.shape:
            return f"{path}: {a.device}/{a.dtype}/{tuple(a.shape)} vs {b.device}/{b.dtype}/{tuple(b.shape)}"
        a, b = a.detach().cpu(), b.detach().cpu()  # the CUDA-written result may live on the (emulated) device
        ok = torch.equal(a, b) if tol is None else torch.allclose(a.double(), b.double(), atol=tol, rtol=tol)
        return None if ok else f"{path}: values differ (max {(a.double() - b.double()).abs().max().item():.3g})"
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            d = _same(a[k], b[k], tol, f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _same(x, y, tol, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float) and isinstance(b, float) and tol is not None:
        return None if math.isclose(a, b, rel_tol=tol, abs_tol=tol) else f"{path}: {a} vs {b}"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def main() -> int:
    from idioms import IDIOMS

    shim_was_on = installers.installed() == "cpu" and torch.cuda.is_available()
    installers.uninstall()
    plain_cuda = torch.cuda.is_available()
    expected = {i.name: _run(i.cpu) for i in IDIOMS}
    installers.install("cpu")
    results = {}
    for i in IDIOMS:
        ok_cuda, got = _run(i.cuda)
        ok_cpu, want = expected[i.name]
        if not ok_cpu:
            results[i.name] = {"ok": False, "detail": f"CPU-written version failed: {want}"}
        elif not ok_cuda:
            results[i.name] = {"ok": False, "detail": f"CUDA-written version failed under the shim: {got}"}
        else:
            diff = _same(got, want, i.tol)
            results[i.name] = {"ok": diff is None, "detail": diff or ""}
    print(json.dumps({"shim_was_on": shim_was_on, "plain_torch_had_cuda": plain_cuda, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
