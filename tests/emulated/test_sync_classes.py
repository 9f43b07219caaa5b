"""sync-debug by argument class (sync_checks.py): one test per class of the synchronizing table's
"classes", on the emulated device, or on CUDA itself where a GPU is present."""

from __future__ import annotations

import os
import sys

import pytest

from emulated_run import run_checks

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sync_checks  # noqa: E402


@pytest.fixture(scope="module")
def results() -> dict:
    return run_checks("sync_checks")


def test_the_table_holds_the_classes_the_issue_named() -> None:
    # the argument patterns engines and metrics libraries use: each has a measured answer
    for name in ("index_put_mask_python_scalar", "index_put_mask_device_scalar_tensor", "index_put_integer_python_scalar",
                 "index_put_integer_device_values", "index_put_integer_accumulate_device_values", "index_mask",
                 "index_put_mask_accumulate_device_scalar", "index_put_row_mask_python_scalar"):
        assert name in sync_checks.MEASURED, name


@pytest.mark.parametrize("name", list(sync_checks.CHECKS))
def test_class(results: dict, name: str) -> None:
    assert results[name]["ok"], results[name]["detail"]


def test_mask_assignment_under_deterministic_algorithms_passes_error_mode() -> None:
    """A metrics library's update: `w[mask] = 0.0` under deterministic algorithms and sync-debug "error"
    runs (CUDA turns it into masked_fill_); `w[idx] = 0.0` with integer indices still raises (the
    scalar is copied to the device), as on CUDA."""
    from emulated_run import run_python

    code = (
        "import torch\n"
        "torch.use_deterministic_algorithms(True)\n"
        "w = torch.randn(64, 8, device='cuda'); mask = w > 0; idx = torch.tensor([1, 5], device='cuda')\n"
        "torch.cuda.set_sync_debug_mode('error')\n"
        "w[mask] = 0.0\n"
        "try:\n"
        "    w[idx] = 0.0\n"
        "except RuntimeError as e:\n"
        "    assert 'synchroniz' in str(e), e\n"
        "    print('integer index: raised')\n"
        "else:\n"
        "    raise SystemExit('integer-index assignment of a Python scalar did not raise')\n"
        "torch.cuda.set_sync_debug_mode(0)\n"
        "assert not bool((w > 0).any())\n"
        "print('ok')\n"
    )
    r = run_python(["-c", code])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "integer index: raised" in r.stdout and "ok" in r.stdout, r.stdout
