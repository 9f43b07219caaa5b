"""When the native core cannot be built or loaded, activation on cpu stops at `import torch` with
EmulatedBuildError naming the fix, instead of running the program without its device."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulated_run import REAL_CUDA, run_python


def test_unbuildable_core_stops_activation(tmp_path: Path) -> None:
    if REAL_CUDA:
        pytest.skip("the emulated device is not used where CUDA is real")
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a build folder under a file cannot be created
    proc = run_python(["-c", "import torch; print('ran without its device')"],
                      {"CUDASHIM_BUILD_DIR": str(blocker / "build")}, timeout=300)
    assert proc.returncode != 0 and "ran without its device" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert "EmulatedBuildError" in last and "CUDASHIM_BUILD_DIR" in last and "python -m cudashim.emulated" in last
