"""The one build step pyproject.toml cannot state: csrc/ ships inside the package.

The emulated device's native core is compiled on the user's machine, against the torch installed there,
so its sources are package data: a wheel or `pip install .` carries csrc/ as cudashim/_csrc/, where
cudashim.emulated._build looks first. An editable install reads csrc/ from the checkout instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

_CSRC = Path(__file__).resolve().parent / "csrc"


class _BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "cudashim" / "_csrc"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(_CSRC, target, ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.so"))


setup(cmdclass={"build_py": _BuildPy})
