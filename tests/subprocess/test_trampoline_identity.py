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
    script.write_text("import cudashim, cudashim as b\nprint('cudashim from', cudashim.__file__)\n"
                      "print('active', b.status()['active'])\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(decoy), "CUDASHIM_PLATFORM": "cpu", "CUDASHIM_SYSROOT": str(tmp_path)}
    # the launcher is this checkout's (-m from its root); the child sees the decoy on PYTHONPATH
    r = subprocess.run([sys.executable, "-m", "cudashim", "run", str(script)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "DECOY" not in r.stdout
    assert f"cudashim from {REPO / 'cudashim' / '__init__.py'}" in r.stdout
    assert "active True" in r.stdout


def test_the_trampoline_does_not_search_its_packages_parent_folder(tmp_path: Path) -> None:
    """The installed trampoline's package usually sits in site-packages: listing that folder (what a
    sys.path search does first) would cost more than the bootstrap itself. It loads the package from
    its own file instead, so the folder is never searched (no finder is cached for it)."""
    probe = tmp_path / "probe.py"
    probe.write_text("import sys, cudashim, cudashim as b\n"
                     f"print(b.status()['active'], {str(REPO)!r} in sys.path_importer_cache, {str(REPO)!r} in sys.path)\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "cudashim" / "_bootstrap"), "CUDASHIM_PLATFORM": "cpu",
           "CUDASHIM_SYSROOT": str(tmp_path)}
    r = subprocess.run([sys.executable, str(probe)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "False"]
