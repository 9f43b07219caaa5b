"""The trampoline runs the cudashim it belongs to, not another copy that sits on sys.path.

A user may have an older cudashim installed (or a second checkout on PYTHONPATH) and start a program
with this checkout's `python -m cudashim run`: the bootstrap, and every later `import cudashim` of the
program, must be this checkout's — else the launcher and the bootstrap disagree on every option.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bootstrap_comes_from_the_launchers_package_not_a_decoy_on_the_path(tmp_path: Path) -> None:
    decoy = tmp_path / "decoy"
    (decoy / "cudashim" / "_bootstrap").mkdir(parents=True)
    (decoy / "cudashim" / "__init__.py").write_text("")
    (decoy / "cudashim" / "_bootstrap" / "__init__.py").write_text("def bootstrap():\n    print('DECOY BOOTSTRAP')\n")
    script = tmp_path / "app.py"
    script.write_text("import cudashim, cudashim._bootstrap as b\nprint('cudashim from', cudashim.__file__)\n"
                      "print('active', b.status()['active'])\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(decoy), "CUDASHIM_PLATFORM": "cpu", "CUDASHIM_SYSROOT": str(tmp_path)}
    # the launcher is this checkout's (-m from its root); the child sees the decoy on PYTHONPATH
    r = subprocess.run([sys.executable, "-m", "cudashim", "run", str(script)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "DECOY" not in r.stdout
    assert f"cudashim from {REPO / 'cudashim' / '__init__.py'}" in r.stdout
    assert "active True" in r.stdout
