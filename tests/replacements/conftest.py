"""replacements tests run in-process on CPU tensors: the platform is pinned to cpu through the real resolver."""

from __future__ import annotations

import pytest

from cudashim import _state


@pytest.fixture(autouse=True)
def _cpu_platform(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDASHIM_PLATFORM", "cpu")
    _state.reset()
    yield
    _state.reset()
