"""The `trust` fixture: fresh interpreters in scrubbed environments (see _trust.py)."""

from __future__ import annotations

import pytest

from ._trust import REPO, Trust


@pytest.fixture(scope="session")
def trust(tmp_path_factory: pytest.TempPathFactory) -> Trust:
    pkg = tmp_path_factory.mktemp("pkg")
    (pkg / "cudashim").symlink_to(REPO / "cudashim", target_is_directory=True)
    return Trust(pkg, tmp_path_factory.mktemp("empty_sysroot"))
