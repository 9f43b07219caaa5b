"""The idiom table (tests/cpu/idioms.py) on the simulated Ascend NPU, in two interpreters.

`expect OUT`  (plain python, no shim): every CPU-written twin on plain torch (or, where _npu_answers.ANSWERS
names the idiom, the CPU-written code of the NPU's answer); torch.save()s the results.
`compare EXPECTED` (under `cudashim run --platform ascend --simulate`): every CUDA-written version, each
compared with its twin by tests/cpu/_idiom_runner.py's comparison. Prints one JSON object:
{"platform": ..., "results": {name: {"ok": bool, "detail": str, "error": "Type: message" | None}}}.

The twins run in their own interpreter because transfer_to_npu patches torch process-wide: under the
simulated platform even CPU-written code would no longer be plain torch's.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from typing import Any

_CPU_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpu")
sys.path.insert(0, _CPU_TESTS)

import torch  # noqa: E402  - under `cudashim run` the import hook installs the ascend layer here

from _idiom_runner import _run, _same  # noqa: E402  - one comparison for the cpu and the simulated tables
from _npu_answers import ANSWERS  # noqa: E402
from idioms import IDIOMS  # noqa: E402

warnings.filterwarnings("ignore")


def _expect(out: str) -> int:
    torch.save({i.name: _run(ANSWERS[i.name][1] if i.name in ANSWERS else i.cpu) for i in IDIOMS}, out)
    return 0


def _attempt(fn: Any) -> tuple[Any, BaseException | None, str]:
    torch.manual_seed(0)
    try:
        return fn(), None, ""
    except Exception as exc:  # the test asserts which error, if the table promises one
        return None, exc, traceback.format_exc(limit=8)


def _compare(expected_path: str) -> int:
    expected = torch.load(expected_path, weights_only=False)
    results = {}
    for i in IDIOMS:
        got, exc, tb = _attempt(i.cuda)
        ok_cpu, want = expected[i.name]
        if not ok_cpu:
            results[i.name] = {"ok": False, "detail": f"CPU-written version failed: {want}", "error": None}
        elif exc is not None:
            results[i.name] = {"ok": False, "detail": f"CUDA-written version failed: {tb}",
                               "error": f"{type(exc).__name__}: {exc}"}
        else:
            diff = _same(got, want, i.tol)
            results[i.name] = {"ok": diff is None, "detail": diff or "", "error": None}
    from cudashim.platform.contract import platform_name

    print(json.dumps({"platform": platform_name(), "npu_loaded": "torch_npu" in sys.modules, "results": results}))
    return 0


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    raise SystemExit(_expect(path) if mode == "expect" else _compare(path))
