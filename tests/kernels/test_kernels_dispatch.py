"""ops.py dispatch, and the three backends kept isomorphic: same factories, same signatures."""

from __future__ import annotations

import inspect
import warnings

import pytest

from cudashim import _state
from cudashim.errors import KernelUnavailableError
from cudashim.kernels import BACKENDS, ops


@pytest.fixture(autouse=True)
def _clean():
    _state.reset()
    yield
    _state.reset()


def _ann(a: object) -> str:
    # torch/ spells annotations as strings (postponed), cuda/ and ascend/ cannot (TileLang reads them)
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _sig(fn) -> list[tuple[str, object, object, str]]:
    return [(p.name, p.kind, p.default, _ann(p.annotation)) for p in inspect.signature(fn).parameters.values()]


def test_backends_define_the_same_factories_with_the_same_signatures():
    tables = {b: ops.backend_factories(b) for b in BACKENDS}
    names = {b: set(t) for b, t in tables.items()}
    assert names["torch"] >= {"store_kv_cache_tl", "rms_norm_tl", "rope_tl", "per_token_cast_tl", "copy_block_tables_tl"}
    for b in BACKENDS:
        assert names[b] == names["torch"], f"{b} differs from torch: {sorted(names[b] ^ names['torch'])}"
    for name in sorted(names["torch"]):
        ref = _sig(tables["torch"][name])
        for b in ("cuda", "ascend"):
            assert _sig(tables[b][name]) == ref, f"{b}.{name} signature differs from torch.{name}"


def test_backend_modules_match_file_for_file():
    # one file per kernel family per backend, the same names in each, so a reader finds its twin
    import pkgutil

    import cudashim.kernels.ascend as asc
    import cudashim.kernels.cuda as cuda
    import cudashim.kernels.torch as tb

    def files(pkg):
        return {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}

    assert files(cuda) == files(asc) == files(tb)


def test_ops_reexports_the_active_backends_factories(monkeypatch):
    monkeypatch.setattr(ops, "_backend", "torch")
    from cudashim.kernels.torch.norm import rms_norm_tl

    assert ops.rms_norm_tl is rms_norm_tl
    from cudashim.kernels.ops import store_kv_cache_tl  # `from ops import name` goes through __getattr__

    assert store_kv_cache_tl.__module__ == "cudashim.kernels.torch.store_kv_cache"
    assert "rope_tl" in dir(ops)


def test_ops_picks_the_backend_named_by_the_platform(monkeypatch):
    monkeypatch.setenv("CUDASHIM_PLATFORM", "cpu")
    pytest.importorskip("cudashim.platform")
    _state.reset()
    assert ops.backend() == "torch"
    assert ops.per_token_cast_tl.__module__ == "cudashim.kernels.torch.quant"


def test_missing_factory_names_kernel_backend_and_who_has_it(monkeypatch):
    monkeypatch.setattr(ops, "_backend", "ascend")
    # the ascend backend as a user would find it if rope had not been ported yet
    partial = {k: v for k, v in ops.backend_factories("ascend").items() if k != "rope_tl"}
    monkeypatch.setattr(ops, "_exported", partial)
    with pytest.raises(KernelUnavailableError) as info:
        ops.rope_tl
    msg = str(info.value)
    assert "'rope_tl'" in msg and "'ascend'" in msg and "cuda, torch" in msg
    assert not hasattr(ops, "no_such_kernel_tl")  # AttributeError subclass: hasattr stays honest
    with pytest.raises(KernelUnavailableError, match="none of cuda, ascend, torch"):
        ops.no_such_kernel_tl


def test_asc_per_token_cast_other_groups_route_to_torch_with_one_warning():
    torch = pytest.importorskip("torch")
    pytest.importorskip("cudashim.platform.capabilities")
    from cudashim.kernels.ascend.quant import per_token_cast_tl as asc_cast
    from cudashim.kernels.torch.quant import per_token_cast_tl as ref_cast

    with pytest.warns(RuntimeWarning, match="per_token_cast_granularity"):
        cast = asc_cast(256, group_size=64, sf_dtype="int16")
    x = torch.randn(3, 256).bfloat16()
    q, sf = cast(x)
    q_ref, sf_ref = ref_cast(256, group_size=64, sf_dtype="int16")(x)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(sf, sf_ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asc_cast(512, group_size=128, sf_dtype="int16")  # warned once per process, not per call
