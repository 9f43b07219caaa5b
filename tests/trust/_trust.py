"""Fresh-interpreter helpers for the trust and failure-boundary tests (issue 16).

Each test builds a small project tree under tmp_path and starts Python in it, either with the shim
on PYTHONPATH (the bare activation: bootstrap folder first, like a user's `PYTHONPATH=<repo>`) or
through `python -m cudashim run`. The environment is scrubbed of the shim's variables and detection
points at an empty tree, so every result is the cpu platform's on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "cudashim" / "_bootstrap"
_SCRUB = {"PYTHONPATH", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "LOCAL_RANK", "RANK", "WORLD_SIZE",
          "LOCAL_WORLD_SIZE", "PYTHONSTARTUP", "PYTHONWARNINGS"}


class Trust:
    def __init__(self, pkg: Path, empty_root: Path) -> None:
        self.pkg = pkg
        self.empty_root = empty_root

    def env(self, *, shim: bool = True, **extra: str | None) -> dict[str, str]:
        """A clean environment; with `shim`, the bootstrap folder first on PYTHONPATH (bare activation)."""
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith("CUDASHIM_")}
        env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), str(self.pkg)] if shim else [str(self.pkg)])
        env["CUDASHIM_SYSROOT"] = str(self.empty_root)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def python(self, args: list[str], *, cwd: Path | str, env: dict[str, str] | None = None,
               input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=cwd, env=self.env() if env is None else env,
                              input=input, capture_output=True, text=True, timeout=timeout)

    def run(self, args: list[str], *, cwd: Path | str, env: dict[str, str] | None = None,
            input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`python -m cudashim run ARGS` (the package importable, the shim not yet active)."""
        return self.python(["-m", "cudashim", "run", *args], cwd=cwd,
                           env=self.env(shim=False) if env is None else env, input=input, timeout=timeout)

    def cli(self, args: list[str], *, cwd: Path | str, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.python(["-m", "cudashim", *args], cwd=cwd, env=self.env(shim=False) if env is None else env,
                           timeout=timeout)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
