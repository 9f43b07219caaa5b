"""Fresh-interpreter helpers for the trust and failure-boundary tests (issue 16).

Each test builds a small project tree under tmp_path and starts Python in it, either with the shim
on PYTHONPATH (the bare activation: the bootstrap folder first, like a user's `PYTHONPATH=<repo>`) or
through `python -m cudashim run`. The environment is the clean one of tests/fixtures/shimproc.py:
scrubbed of the shim's variables, detection pointed at an empty tree (the cpu platform anywhere).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shimproc import REPO, Shim

__all__ = ["REPO", "Trust", "write"]


class Trust(Shim):
    """Shim whose plain `python` is the bare activation; `run` and `cli` start unshimmed launchers."""

    def bare(self, **extra: str | None) -> dict[str, str]:
        """A clean environment with the bootstrap folder first on PYTHONPATH."""
        return self.env(self.bootstrap_dir, **extra)

    def python(self, args: list[str], env: dict[str, str] | None = None, *, cwd: os.PathLike[str] | str | None = None,
               input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return super().python(args, self.bare() if env is None else env, cwd=cwd, input=input, timeout=timeout)

    def run(self, args: list[str], env: dict[str, str] | None = None, *, cwd: os.PathLike[str] | str | None = None,
            input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return super().run(args, self.env() if env is None else env, cwd=cwd, input=input, timeout=timeout)

    def cli(self, args: list[str], env: dict[str, str] | None = None, *, cwd: os.PathLike[str] | str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`python -m cudashim ARGS` (doctor, patches), unshimmed."""
        return super().python(["-m", "cudashim", *args], self.env() if env is None else env, cwd=cwd, timeout=timeout)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
