"""The ascend layer's pieces that need no torch_npu: env pinning, allocator keys, enforcement, probes.

In-process and torch-global-free (the composed whole is test_transfer_to_npu_contract.py, in a fresh
interpreter). Only modules already in sys.modules are probed here, so no import hook is installed.
"""

from __future__ import annotations

import sys
import types
import warnings

import pytest

from cudashim.installers import _ascend_enforce, _ascend_memory, ascend, probes
from cudashim.errors import CapabilityError


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDASHIM_REPORT", raising=False)
    yield
    probes.uninstall()
    from cudashim.platform import capabilities

    capabilities._reset()


class _NpuMemory:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def _set_allocator_settings(self, s: str) -> None:
        self.calls.append(s)


def test_allocator_runtime_key_forwarded_degrade_key_warns() -> None:
    mem = _NpuMemory()
    set_settings = _ascend_memory.make_set_allocator_settings(mem)
    with pytest.warns(RuntimeWarning, match="roundup_power2_divisions"):
        set_settings("expandable_segments:False, roundup_power2_divisions:4")
    assert mem.calls == ["expandable_segments:False"]


@pytest.mark.parametrize("settings, named", [
    ("garbage_collection_threshold:0.6", "garbage_collection_threshold"),
    ("expandable_segments:True,backend:cudaMallocAsync", "backend"),
    ("expandable_segments", "expandable_segments"),
])
def test_allocator_refusals_name_the_key(settings: str, named: str) -> None:
    mem = _NpuMemory()
    with pytest.raises(CapabilityError, match=named):
        _ascend_memory.make_set_allocator_settings(mem)(settings)
    assert mem.calls == []  # nothing half-applied


def test_pdl_off_is_a_plain_call_on_is_degraded_with_one_warning() -> None:
    seen = []
    set_pdl = _ascend_enforce._enforcing(lambda on: seen.append(on), "deep_gemm.set_pdl", "pdl", "truthy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        set_pdl(False)
    with pytest.warns(RuntimeWarning, match="deep_gemm.set_pdl.*ascend"):
        set_pdl(True)
    assert seen == [False, True]


def test_batch_invariant_mode_is_refused_on_ascend() -> None:
    called = []
    enable = _ascend_enforce._enforcing(lambda: called.append(1), "batch_invariant_ops.enable_batch_invariant_mode",
                            "batch_invariant", "call")
    with pytest.raises(CapabilityError, match="enable_batch_invariant_mode.*ascend"):
        enable()
    assert called == []


def test_enforced_table_names_known_capabilities() -> None:
    from cudashim.platform import capabilities

    for _module, _attr, cap, when in ascend.ENFORCED:
        capabilities.get(cap)
        assert when in ("call", "truthy")


def test_probe_sees_the_real_availability_and_restores(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    mod = types.ModuleType("_cudashim_probe_target")
    seen = []
    mod.detect = lambda: seen.append(torch.cuda.is_available()) or "done"
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    # only this entry: the real ones would put the import hook on sys.meta_path of this process
    monkeypatch.setattr(probes, "PROBES", {"_cudashim_probe_dist": {
        "version": None, "platforms": ("ascend",), "apis": [f"{mod.__name__}:detect"]}})
    shown = lambda: True  # noqa: E731 - what an installer shows the program
    monkeypatch.setattr(torch.cuda, "is_available", shown)
    probes.install("ascend", lambda: False)
    assert f"{mod.__name__}:detect" in probes.installed()
    assert mod.detect() == "done"
    assert seen == [False] and torch.cuda.is_available is shown
    probes.uninstall()
    mod.detect()
    assert seen == [False, True]


def test_probe_skipped_below_its_minimum_version(monkeypatch) -> None:
    pytest.importorskip("torch")
    mod = types.ModuleType("_cudashim_probe_old")
    original = mod.detect = lambda: None
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(probes, "PROBES", {"pytest": {"version": "999.0", "platforms": ("ascend",),
                                                      "apis": [f"{mod.__name__}:detect"]}})
    probes.install("ascend", lambda: False)
    assert mod.detect is original


def test_no_import_hook_left_in_this_process() -> None:
    from cudashim import importhook as _hook

    assert not _hook.installed()


def test_probe_list_is_data_for_tilelang() -> None:
    targets = {p.module + ":" + p.qualname for p in probes.probes_for("ascend")}
    assert "tilelang.backend.target:auto_detect_target" in targets
