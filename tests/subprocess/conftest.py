"""Helpers for fresh-interpreter tests: a clean environment and ways to start Python under the shim.

Every test here starts new interpreters, because what is tested (sitecustomize, sys.meta_path, the
environment before torch loads) is process-wide and happens before any test code could run.

- the package is importable through a folder holding only a `cudashim` link (not the repo root, whose
  top-level sitecustomize.py would switch the shim on in every child);
- CUDASHIM_SYSROOT points at an empty tree, so detection says cpu on any machine (GPU boxes included);
- variables the bootstrap reads or writes are removed, so the user's shell cannot leak into results.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP_DIR = REPO / "cudashim" / "_bootstrap"

_SCRUB_PREFIXES = ("CUDASHIM_", "HCCL_", "NCCL_", "PYTORCH_", "TORCH_DEVICE_BACKEND", "TILELANG_")
_SCRUB = {"PYTHONPATH", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "LOCAL_RANK", "RANK",
          "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TASK_QUEUE_ENABLE", "PYTHONSTARTUP", "PYTHONWARNINGS"}


class Shim:
    repo = REPO
    bootstrap_dir = BOOTSTRAP_DIR

    def __init__(self, pkg_dir: Path, empty_root: Path):
        self.pkg_dir = pkg_dir
        self.empty_root = empty_root

    def env(self, *paths: os.PathLike[str] | str, **extra: str | None) -> dict[str, str]:
        """A clean environment: PYTHONPATH = paths (strings or Paths) then the package folder."""
        env = {k: v for k, v in os.environ.items()
               if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}
        env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(self.pkg_dir)])
        env["CUDASHIM_SYSROOT"] = str(self.empty_root)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run(self, args: list[str], env: dict[str, str] | None = None, *, cwd: os.PathLike[str] | str | None = None,
            input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`python -m cudashim run ARGS` in a clean environment."""
        return self.python(["-m", "cudashim", "run", *args], env, cwd=cwd, input=input, timeout=timeout)

    def python(self, args: list[str], env: dict[str, str] | None = None, *, cwd: os.PathLike[str] | str | None = None,
               input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Plain `python ARGS` in a clean environment (the shim only where env says so)."""
        return subprocess.run([sys.executable, *args], env=self.env() if env is None else env, cwd=cwd,
                              input=input, capture_output=True, text=True, timeout=timeout)


    @staticmethod
    def bootstraps(stderr: str) -> Counter[int]:
        """pid -> how many times that process finished the bootstrap (CUDASHIM_DEBUG=1 trace lines)."""
        return Counter(int(pid) for pid in re.findall(r"^cudashim\[(\d+)\]: bootstrap done$", stderr, re.M))


@pytest.fixture(scope="session")
def shim(tmp_path_factory: Any) -> Shim:
    pkg = tmp_path_factory.mktemp("pkg")
    (pkg / "cudashim").symlink_to(REPO / "cudashim", target_is_directory=True)
    return Shim(pkg, tmp_path_factory.mktemp("empty_sysroot"))
