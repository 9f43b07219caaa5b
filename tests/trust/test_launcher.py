"""Launcher fixes of issue 16: `run -` (script on stdin), executables beside sys.executable, a user's
sitecustomize run once per interpreter (the program in a child process when the launcher ran it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ._trust import Trust, write


def test_run_dash_reads_the_script_from_stdin(trust: Trust, tmp_path: Path) -> None:
    proc = trust.run(["-", "a1", "a2"], cwd=tmp_path,
                     input="import sys, cudashim._bootstrap as b\nprint(sys.argv, b.status()['active'])\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['-', 'a1', 'a2'] True"


def test_executable_beside_sys_executable_is_found_off_path(trust: Trust, tmp_path: Path) -> None:
    # a venv used by its full path: its bin folder is not on PATH, yet its console scripts are its own
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "pip").exists()
    env = trust.env()
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).resolve() != venv_bin.resolve() and not (Path(p) / "pip").exists())
    proc = trust.run(["pip", "--version"], cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pip ")


def test_user_sitecustomize_runs_once_per_interpreter(trust: Trust, tmp_path: Path) -> None:
    # The launcher's own interpreter was started with the user's PYTHONPATH and ran the file before
    # cudashim's code could act; exec would keep that pid and run it again there (issue 16). The
    # launcher then runs the program as a child: each pid runs it once.
    user = tmp_path / "usersite"
    log = tmp_path / "log"
    write(user / "sitecustomize.py", f"import os, sys\nopen({str(log)!r}, 'a').write(f'{{os.getpid()}} {{sys.orig_argv[1]}}\\n')\n")
    write(tmp_path / "app.py", "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'], check=True)\nsys.exit(3)\n")
    env = trust.env()
    env["PYTHONPATH"] = f"{user}{os.pathsep}{env['PYTHONPATH']}"
    proc = trust.run(["app.py"], cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr  # the program's exit code, through the launcher
    lines = [line.split() for line in log.read_text().splitlines()]
    assert sorted(arg for _, arg in lines) == ["-c", "-m", "app.py"], lines  # child, launcher, program
    pids = [pid for pid, _ in lines]
    assert len(set(pids)) == 3, f"a pid ran the user's sitecustomize twice: {lines}"


def test_program_run_as_child_ends_as_the_program_ended(trust: Trust, tmp_path: Path) -> None:
    # the child-process path (a user sitecustomize ran in the launcher) keeps exec's promise: the
    # caller sees the program's own end, here death by SIGTERM
    user = tmp_path / "usersite"
    write(user / "sitecustomize.py", "")
    write(tmp_path / "app.py", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    env = trust.env()
    env["PYTHONPATH"] = f"{user}{os.pathsep}{env['PYTHONPATH']}"
    proc = trust.run(["app.py"], cwd=tmp_path, env=env)
    assert proc.returncode == -15, (proc.returncode, proc.stderr)
