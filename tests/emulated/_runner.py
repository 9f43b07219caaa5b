"""Run checks.py (or the checks module named by argv[1]) in this interpreter and print {"mode": ..., "results": {name: {"ok", "detail"}}} as JSON."""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402  (under `cudashim run` the import hook installs the device here)

import importlib  # noqa: E402

CHECKS = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "checks").CHECKS

warnings.filterwarnings("ignore")
results = {}
for name, fn in CHECKS.items():
    try:
        fn()
        results[name] = {"ok": True, "detail": ""}
    except BaseException as e:  # noqa: BLE001 - reported, not raised
        results[name] = {"ok": False, "detail": f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=5)}"}
print(json.dumps({"torch": torch.__version__, "results": results}))
