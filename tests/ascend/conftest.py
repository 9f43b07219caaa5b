from __future__ import annotations

from pathlib import Path

import pytest

from ._wheel import build_standin, fetch_wheel


@pytest.fixture(scope="session")
def npu_wheel() -> Path:
    wheel, why = fetch_wheel()
    if wheel is None:
        pytest.skip(f"the L1 contract test needs the real torch-npu wheel and it could not be downloaded: {why}")
    return wheel


@pytest.fixture(scope="session")
def standin_site(npu_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_standin(npu_wheel, tmp_path_factory.mktemp("torch_npu_standin"))
