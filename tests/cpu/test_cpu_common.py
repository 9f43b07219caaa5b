"""The shared alias helpers (cudashim/installers/_common.py), in-process: nothing here installs a hook."""

from __future__ import annotations

import types

import pytest

from cudashim import _state
from cudashim.installers._common import Bindings


def test_bindings_restore_exactly() -> None:
    class Base:
        def inherited(self):
            return "base"

    class Child(Base):
        def own(self):
            return "own"

    mod = types.ModuleType("m")
    mod.f = lambda: "f"
    orig_f, orig_own = mod.f, Child.__dict__["own"]
    b = Bindings()
    b.bind(Child, "inherited", lambda self: "x")
    b.bind(Child, "own", lambda self: "y")
    b.bind(Child, "own", lambda self: "z")  # re-binding keeps the first original
    b.bind(mod, "f", lambda: "g")
    b.bind(mod, "new", 1)
    assert Child().inherited() == "x" and Child().own() == "z" and mod.f() == "g"
    assert b.original(Child, "own") is orig_own
    b.restore()
    assert "inherited" not in Child.__dict__ and Child().inherited() == "base"
    assert Child.__dict__["own"] is orig_own and mod.f is orig_f and not hasattr(mod, "new")
    assert len(b) == 0
    b.restore()  # idempotent


def test_report_hook_wraps_only_when_enabled(monkeypatch, tmp_path) -> None:
    from cudashim.installers._common import _report_wrap

    def f():
        return 1

    monkeypatch.delenv("CUDASHIM_REPORT", raising=False)
    _state.reset()
    try:
        assert _report_wrap("torch.cuda.f", "aliased", f) is f  # off: the plain function, zero cost
        monkeypatch.setenv("CUDASHIM_REPORT", str(tmp_path / "r.json"))
        _state.reset()
        wrapped = _report_wrap("torch.cuda.f", "aliased", f)
        assert wrapped is not f and wrapped() == 1
        from cudashim import report

        assert report.entries()["torch.cuda.f"]["calls"] == 1
    finally:
        monkeypatch.delenv("CUDASHIM_REPORT", raising=False)
        _state.reset()
