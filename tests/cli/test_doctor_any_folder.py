"""`python -m cudashim doctor` works from any folder, one holding a folder named `cudashim` included.

There, `import cudashim` finds that folder first (a namespace package: the current directory leads
sys.path under `-m`) whenever the real package is found only through a meta-path finder, as with
setuptools' strict editable installs. The shim's own modules then load through that finder while the
name `cudashim` stays the namespace package, so no module of the shim may reach its plumbing through
the package face (`from cudashim import _on_reset` failed exactly so). A fresh interpreter with
`-S` (no .pth entry puts the repository on sys.path) and such a finder reproduces it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_CHILD = r"""
import importlib.util, os, runpy, sys
REPO = %(repo)r

class Editable:
    '''What a strict editable install puts on sys.meta_path: cudashim.* mapped to the checkout.'''
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "cudashim":
            return None
        base = os.path.join(REPO, *name.split("."))
        if os.path.isdir(base):
            return importlib.util.spec_from_file_location(name, os.path.join(base, "__init__.py"),
                                                          submodule_search_locations=[base])
        if os.path.isfile(base + ".py"):
            return importlib.util.spec_from_file_location(name, base + ".py")
        return None

sys.meta_path.append(Editable())
sys.path.insert(0, os.getcwd())  # what `python -m` does
sys.argv = ["cudashim", "doctor"]
try:
    runpy.run_module("cudashim", run_name="__main__", alter_sys=True)
except SystemExit as e:
    assert e.code in (0, None), e.code
import cudashim
print("face:", getattr(cudashim, "__file__", None))
print("OK")
"""


def _doctor(cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "CUDASHIM_PLATFORM": "cpu"}
    return subprocess.run([sys.executable, "-S", "-c", _CHILD % {"repo": str(REPO)}], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_doctor_from_a_folder_holding_a_folder_named_cudashim(tmp_path: Path) -> None:
    (tmp_path / "cudashim").mkdir()  # e.g. the parent of a checkout named cudashim
    proc = _doctor(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[-1] == "OK", proc.stdout[-2000:]
    # the situation is the one described: the name cudashim is the namespace folder, not the package
    assert "face: None" in lines, lines[-3:]
    assert "platform" in proc.stdout and "cpu" in proc.stdout


def test_doctor_from_a_plain_folder(tmp_path: Path) -> None:
    proc = _doctor(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "OK"
