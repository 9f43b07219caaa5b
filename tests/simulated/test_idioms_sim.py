"""The CUDA idiom table (tests/cpu/idioms.py) on the simulated Ascend NPU (issue 19's must-show).

Each CUDA-written idiom, run under `cudashim run --platform ascend --simulate`, equals its CPU-written
twin run on plain torch in another interpreter; or, where _npu_answers.py says the NPU answers
otherwise (device type npu, HCCL, the NPU's properties), equals the CPU-written code of that answer;
or raises the error _npu_answers.RAISES names (the capability error the table promises for ascend).
(This file is not called test_idioms.py: pytest cannot hold two test modules of one basename.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _sim import ROOT, need_wheel, run_sim

HERE = Path(__file__).resolve().parent
import _npu_answers  # noqa: E402  - puts tests/cpu on sys.path for idioms
from _npu_answers import ANSWERS, RAISES  # noqa: E402
from idioms import IDIOMS  # noqa: E402

_ENV = {"CUDASHIM_NPU_DEVICES": "2", "CUDASHIM_CPU_DEVICES": "2"}  # idioms.py's _COUNT reads the latter


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> dict:
    need_wheel()
    import os
    import subprocess
    import sys

    expected = tmp_path_factory.mktemp("idioms") / "expected.pt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env.update(_ENV, PYTHONPATH=str(ROOT))
    plain = subprocess.run([sys.executable, str(HERE / "_idiom_sim_runner.py"), "expect", str(expected)], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=900)
    assert plain.returncode == 0, plain.stderr[-4000:]
    r = run_sim([str(HERE / "_idiom_sim_runner.py"), "compare", str(expected)], _ENV, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_table_ran_on_the_simulated_ascend_platform(table: dict) -> None:
    assert table["platform"] == "ascend" and table["npu_loaded"]
    assert set(table["results"]) == {i.name for i in IDIOMS}


def test_every_exception_names_an_idiom_of_the_table() -> None:
    names = {i.name for i in IDIOMS}
    assert set(ANSWERS) <= names and set(RAISES) <= names and not set(ANSWERS) & set(RAISES)


@pytest.mark.parametrize("name", [i.name for i in IDIOMS if i.name not in RAISES])
def test_idiom_equals_its_twin(table: dict, name: str) -> None:
    result = table["results"][name]
    why = f" (the NPU's answer: {ANSWERS[name][0]})" if name in ANSWERS else ""
    assert result["ok"], f"{result['error'] or ''}\n{result['detail']}{why}"


@pytest.mark.parametrize("name", sorted(RAISES))
def test_idiom_raises_what_the_table_promises(table: dict, name: str) -> None:
    kind, fragment, why = RAISES[name]
    error = table["results"][name]["error"]
    assert error is not None, f"{name} did not raise; expected {kind} ({why})"
    assert error.startswith(f"{kind}: ") and fragment in error, f"{error!r}: expected {kind} with {fragment!r} ({why})"
