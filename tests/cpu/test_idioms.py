"""The CUDA idiom table (idioms.py) under `cudashim run --platform cpu`, each result compared with the
same code written for the CPU. One fresh interpreter runs the whole table (the shim installs an
import hook and rebinds torch, which must not leak into this process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# idioms.py / compile_cases.py sit beside this file: pytest's rootdir-less import puts this folder on sys.path
from idioms import IDIOMS  # noqa: E402


@pytest.fixture(scope="module")
def table() -> dict:
    env = dict(os.environ, CUDASHIM_CPU_DEVICES="2", PYTHONPATH=str(ROOT))
    env.pop("CUDASHIM_DISABLE", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", str(HERE / "_idiom_runner.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_table_is_big_enough() -> None:
    assert len(IDIOMS) >= 60
    assert len({i.name for i in IDIOMS}) == len(IDIOMS), "idiom names must be unique"


def test_shim_was_on_and_plain_torch_has_no_cuda(table: dict) -> None:
    assert table["shim_was_on"], "the import hook did not install the cpu platform (the emulated device)"
    assert not table["plain_torch_had_cuda"], "with the shim off, torch.cuda must be the real (absent) one"


@pytest.mark.parametrize("name", [i.name for i in IDIOMS])
def test_idiom(table: dict, name: str) -> None:
    result = table["results"][name]
    assert result["ok"], result["detail"]
