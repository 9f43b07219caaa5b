"""The shared alias helpers (cudashim/aliases/_common.py), in-process: nothing here installs a hook."""

from __future__ import annotations

import io
import types

import pytest
import torch

from cudashim import _state
from cudashim.aliases._common import (
    Bindings,
    DeviceRewriter,
    discover_factories,
    map_location_for,
    translate_backend,
    wrap_args,
    wrap_factory,
)

CPU = torch.device("cpu")


@pytest.mark.parametrize("arg, want", [
    ("cuda", "cpu"), ("cuda:0", "cpu"), ("cuda:3", "cpu"), (0, CPU), (5, CPU),
    (torch.device("cuda"), CPU), (torch.device("cuda", 1), CPU),
    ("cpu", "cpu"), ("meta", "meta"), (torch.device("meta"), torch.device("meta")), (None, None), (True, True),
    ("cudagraph", "cudagraph"), ([0, 1], [0, 1]),
])
def test_rewriter_to_cpu(arg, want) -> None:
    rw = DeviceRewriter(torch, "cpu")
    assert rw(arg) == want
    assert rw(arg) == want  # second time from the cache


@pytest.mark.parametrize("arg, want", [
    ("cuda", "xpu"), ("cuda:2", "xpu:2"), (torch.device("cuda", 1), torch.device("xpu", 1)), (3, torch.device("xpu", 3)),
    ("cpu", "cpu"),
])
def test_rewriter_keeps_index_for_accelerators(arg, want) -> None:
    # the ascend layer uses keep_index with "npu"; xpu is a device type plain torch can name
    assert DeviceRewriter(torch, "xpu", keep_index=True)(arg) == want


def test_index_of() -> None:
    rw = DeviceRewriter(torch, "cpu")
    assert [rw.index_of(d) for d in ("cuda", "cuda:2", 1, torch.device("cuda", 3), "cpu", True)] == [None, 2, 1, 3, None, None]


@pytest.mark.parametrize("backend, want", [
    ("nccl", "gloo"), ("NCCL", "gloo"), ("gloo", "gloo"), (None, None), ("mpi", "mpi"),
    ("cpu:gloo,cuda:nccl", "gloo"), ("cuda:nccl", "gloo"), ("cpu:gloo,cuda:mpi", "cpu:gloo,cuda:mpi"),
])
def test_translate_backend(backend, want) -> None:
    assert translate_backend(backend, {"nccl": "gloo"}) == want


def _saved() -> io.BytesIO:
    buf = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buf)
    buf.seek(0)
    return buf


def test_map_location_forms() -> None:
    rw = DeviceRewriter(torch, "cpu")
    restore = torch.serialization.default_restore_location
    assert map_location_for(None, rw, restore) == "cpu"
    assert map_location_for("cuda:1", rw, restore) == "cpu"
    assert map_location_for(torch.device("cuda"), rw, restore) == CPU
    seen = []
    fn = map_location_for(lambda s, loc: seen.append(loc), rw, restore)
    out = torch.load(_saved(), map_location=fn)
    assert seen == ["cpu"] and torch.equal(out["w"], torch.arange(3.0))
    table = map_location_for({"cuda:1": "cuda:0"}, rw, restore)
    assert torch.load(_saved(), map_location=table)["w"].device == CPU


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


def test_wrap_factory_rewrites_device_and_drops_pinning() -> None:
    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))

    rw = DeviceRewriter(torch, "cpu")
    wrap_factory(fake, rw)(3, device="cuda", pin_memory=True)
    wrap_factory(fake, rw)(3)
    wrap_factory(fake, rw, positional=1)(3, "cuda:1")
    assert calls == [((3,), {"device": "cpu", "pin_memory": False}), ((3,), {}), ((3, "cpu"), {})]


def test_wrap_args_positional_and_keyword() -> None:
    f = wrap_args(lambda a, b=None, *, c=None: (a, b, c), {"b": (1, str.upper), "c": (None, str.upper)})
    assert f("x", "y", c="z") == ("x", "Y", "Z")
    assert f("x", b="y") == ("x", "Y", None)


def test_discover_factories_from_torch() -> None:
    found = {(ns.__name__, name) for ns, name in discover_factories(torch)}
    for want in [("torch", "empty"), ("torch", "zeros"), ("torch", "arange"), ("torch", "tensor"),
                 ("torch", "zeros_like"), ("torch", "randn_like"), ("torch", "full"), ("torch", "eye")]:
        assert want in found
    assert len(found) >= 40
    # found in every namespace that exposes a constructor, not only torch's own
    assert ("torch.fft", "fftfreq") in found


def test_report_hook_wraps_only_when_enabled(monkeypatch, tmp_path) -> None:
    from cudashim.aliases._common import _report_wrap

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
