"""install()/uninstall() of the cpu platform (the emulated device) in a fresh interpreter (it registers import-hook callbacks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _run(*args: str, **env: str) -> dict:
    e = dict(os.environ, **env)
    e.pop("PYTHONPATH", None)  # the repo root holds the sitecustomize trampoline: no shim here
    if "CUDASHIM_REPORT" not in env:
        e.pop("CUDASHIM_REPORT", None)
    proc = subprocess.run([sys.executable, str(HERE / "scripts" / "roundtrip.py"), *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_install_binds_and_uninstall_restores_every_original() -> None:
    r = _run()
    for name in ("torch.cuda.is_available", "torch.cuda.set_device", "torch.cuda.Stream", "torch.cuda.mem_get_info",
                 "torch.cuda.memory.memory_stats", "torch.cuda.default_generators", "torch.cuda.nvtx.range_push",
                 "torch.cuda.CUDAGraph", "torch.cuda.FloatTensor", "torch.accelerator.current_accelerator",
                 "UntypedStorage.__new__", "c10d._new_process_group_helper", "dist.is_nccl_available",
                 "dist.ProcessGroupNCCL", "dist.constants.default_pg_nccl_timeout", "torch.cuda.nccl.version"):
        assert name in r["changed"], name
    assert r["reinstall_changed"] == []
    assert r["left_changed"] == []
    assert r["after_uninstall_cuda"] is False
    # nothing renames CUDA any more: no factory, tensor or module method is rebound
    for name in ("torch.empty", "torch.zeros_like", "Tensor.to", "Tensor.is_cuda", "Module.to", "torch.load",
                 "DeviceContext.__init__", "autocast.__init__", "GradScaler.__init__", "DDP.__init__"):
        assert name not in r["changed"], name
    assert r["wrapped"] is False  # report off: plain functions, no wrapper on the call path


def test_report_on_counts_the_aliased_calls(tmp_path) -> None:
    r = _run("--report", CUDASHIM_REPORT=str(tmp_path / "report.json"))
    assert r["wrapped"] is True
    assert r["report_calls"]["torch.cuda.synchronize"] == 1
    assert r["report_calls"]["torch.cuda.current_device"] == 1
    assert r["left_changed"] == []
