"""The package installs anywhere: a wheel built from the repository carries the native core's sources.

The emulated device's core is compiled on the user's machine, so csrc/ is package data (setup.py copies
it to cudashim/_csrc/), and cudashim.emulated._build reads it from there when it is present. Running the
main job from such a wheel in a fresh environment takes minutes (a build from scratch):
`bash scripts/wheel_check` does that; here the wheel's contents are checked.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("cudashim", "csrc"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "_csrc"))
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                        str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("cudashim-*.whl")
    return whl


def test_the_wheel_carries_every_native_source(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    csrc = sorted(p.relative_to(REPO / "csrc").as_posix() for p in (REPO / "csrc").rglob("*") if p.is_file())
    assert csrc, "csrc/ is empty?"
    missing = [f for f in csrc if f"cudashim/_csrc/{f}" not in names]
    assert not missing, f"csrc files the wheel lacks: {missing}"


def test_the_wheel_requires_ninja(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert any(line.startswith("Requires-Dist: ninja") for line in meta.splitlines()), meta[:2000]


def test_the_build_reads_the_shipped_sources_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed package: cudashim/_csrc/ beside the modules, no csrc/ above them."""
    from cudashim.emulated import _build

    package = tmp_path / "site-packages" / "cudashim"
    (package / "emulated").mkdir(parents=True)
    (package / "_csrc" / "ops").mkdir(parents=True)
    (package / "_csrc" / "ops" / "x.cpp").write_text("")
    monkeypatch.setattr(_build, "__file__", str(package / "emulated" / "_build.py"))
    assert _build._sources_folder() == package / "_csrc"
    assert _build.native_files(package / "_csrc") == (("ops/x.cpp",), ())
