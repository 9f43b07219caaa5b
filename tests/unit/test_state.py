"""cudashim._state.reset(): registered callbacks, and the start-up modules it names instead of registering."""

from __future__ import annotations

import sys

from cudashim import _bootstrap, _state, hardware


def test_every_start_up_module_named_defines_reset():
    for name in _state._START_UP:
        __import__(name)
        assert callable(getattr(sys.modules[name], "_reset", None)), name


def test_reset_clears_detection_without_a_registration(tmp_path):
    hardware.accelerator_kind(str(tmp_path))
    assert hardware._kind_cache  # cached
    _state.reset()
    assert hardware._kind_cache == {}


def test_reset_forgets_the_bootstrap_run(monkeypatch):
    monkeypatch.setattr(_bootstrap, "_bootstrap_runs", 1)
    monkeypatch.setattr(_bootstrap, "_chained", "/somewhere/sitecustomize.py")
    _state.reset()
    assert _bootstrap._bootstrap_runs == 0 and _bootstrap._chained is None


def test_registered_callbacks_run_newest_first_before_the_start_up_modules(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(_state, "_resetters", [])
    monkeypatch.setattr(hardware, "_reset", lambda: calls.append("hardware"))
    monkeypatch.setattr(_bootstrap, "_reset", lambda: calls.append("bootstrap"))
    _state.on_reset(lambda: calls.append("first"))
    _state.on_reset(lambda: calls.append("second"))
    _state.reset()
    assert calls == ["second", "first", "bootstrap", "hardware"]
