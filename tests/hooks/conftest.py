"""Hook tests run in fresh interpreters: they touch sys.meta_path and sys.modules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]

# shared prelude of every script: a Config built in code, so tests do not depend on file discovery
PRELUDE = """
import sys, importlib, importlib.util, types
from cudashim import importhook, patches
from cudashim.config import Config, PatchEntry
patches.uninstall()  # start from nothing even if a sitecustomize bootstrap ran
def cfg(*pairs, disable=()):
    return Config(patches=tuple(PatchEntry(t, r, None, f"test:{t}") for t, r in pairs), disable=frozenset(disable))
"""


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")


OK = "cudashim-test-child-OK"


@pytest.fixture
def shim(tmp_path: Path) -> Callable[..., str]:
    """run(script, files={path: source}, env={}) -> stdout; fails the test unless the script exits 0
    having printed the final OK marker (appended after its last line)."""

    def run(script: str, files: dict[str, str] | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> str:
        write_tree(tmp_path, files or {})
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
        full_env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO)])
        # the repo's sitecustomize trampoline would bootstrap the shim; these tests install by hand
        full_env["CUDASHIM_DISABLE"] = "1"
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(script) + f"\nprint({OK!r})\n"],
            cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=timeout,
        )
        # the exit code alone would pass a script that left early (sys.exit(0), os._exit(0) in a hook);
        # the marker printed after its last line says it ran to the end
        lines = proc.stdout.splitlines()
        assert proc.returncode == 0 and lines and lines[-1] == OK, (
            f"exit {proc.returncode}, last line {lines[-1:]!r} (want {OK!r})\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        return "".join(line + "\n" for line in lines[:-1])

    return run
