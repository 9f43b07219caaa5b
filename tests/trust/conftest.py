"""The `trust` fixture: fresh interpreters in scrubbed environments (see _trust.py)."""

from __future__ import annotations

import pytest
from shimproc import make_pkg_dir

from ._trust import Trust


@pytest.fixture(scope="session")
def trust(tmp_path_factory: pytest.TempPathFactory) -> Trust:
    return Trust(make_pkg_dir(tmp_path_factory), tmp_path_factory.mktemp("empty_sysroot"))
