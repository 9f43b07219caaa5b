"""The `shim` fixture: fresh interpreters in a clean environment (tests/fixtures/shimproc.py says how).

Every test here starts new interpreters, because what is tested (sitecustomize, sys.meta_path, the
environment before torch loads) is process-wide and happens before any test code could run.
"""

from __future__ import annotations

from typing import Any

import pytest
from shimproc import BOOTSTRAP_DIR, REPO, Shim, make_pkg_dir

__all__ = ["BOOTSTRAP_DIR", "REPO", "Shim"]


@pytest.fixture(scope="session")
def shim(tmp_path_factory: Any) -> Shim:
    return Shim(make_pkg_dir(tmp_path_factory), tmp_path_factory.mktemp("empty_sysroot"))
