"""The opt-in Ascend compile check: CUDA-written kernels through the triton-ascend 3.2.0 wheel's frontend
(its code generator, TTIR passes and triton-adapter-opt, TTIR -> linalg; no CANN) in a child process.

Liger-Kernel's RMSNorm (installed, pinned; its CUDA form) compiles only with the shim's libdevice mapping: triton-ascend maps `triton.language.extra.libdevice` onto nothing
(backends/ascend/compiler.py:800-801), so `libdevice.rsqrt` is the stub returning None and the store of its
result fails in the wheel's code generator. The patterns of Triton's tutorials (from pinned libraries) and
nano-vllm's store kernel, launched on the simulated NPU with the check on, are test_triton_sim.py's.
"""

from __future__ import annotations

import json

import pytest
import torch

import _kernels as K
from _ta import need_wheel, wheel_line

from cudashim.triton_route import ascend_compile

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _wheel(tmp_path_factory: pytest.TempPathFactory) -> None:
    need_wheel()


def _liger_rms_norm() -> ascend_compile.Spec:
    from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel

    x, w = torch.empty(8, 4096), torch.empty(4096)
    return ascend_compile.describe(_rms_norm_forward_kernel, dict(
        Y_ptr=x, Y_row_stride=4096, X_ptr=x, X_row_stride=4096, W_ptr=w, W_row_stride=1, RSTD_ptr=x[:, 0],
        RSTD_row_stride=1, n_cols=4096, eps=1e-6, offset=0.0, casting_mode=0, elementwise_affine=True,
        BLOCK_SIZE=4096))


def test_liger_rms_norm_compiles_only_with_the_libdevice_mapping() -> None:
    # the wheel's backend maps libdevice onto nothing: the fact the mapping exists for
    assert wheel_line("triton/backends/ascend/compiler.py", 800).strip().startswith("def get_module_map")
    assert wheel_line("triton/backends/ascend/compiler.py", 801).strip() == "return {}"
    spec = _liger_rms_norm()
    assert "from triton.language.extra.libdevice import rsqrt as rsqrt" in spec.source
    (without,) = ascend_compile.check([spec], map_libdevice=False)
    (with_,) = ascend_compile.check([spec], map_libdevice=True)
    assert not without.compiles and without.stage == "ttir"
    assert "cannot convert None" in without.message  # the stub rsqrt returned None; the store refused it
    assert with_.compiles, with_.message


def test_refusals_come_in_the_wheels_own_words() -> None:
    x, y64 = torch.empty(64), torch.empty(64, dtype=torch.float64)
    d = ascend_compile.describe
    cast, to, dot, erfc = ascend_compile.check([
        d(K.cast_fp64_kernel, dict(x_ptr=x, y_ptr=y64, n=64, BLOCK=64)),
        d(K.to_fp64_kernel, dict(x_ptr=x, y_ptr=y64, n=64, BLOCK=64)),
        d(K.dot_kernel, dict(a_ptr=torch.empty(256, dtype=torch.float64), c_ptr=torch.empty(256, dtype=torch.float64),
                             BLOCK=16)),
        d(K.erfc_kernel, dict(x_ptr=x, y_ptr=x, n=64, BLOCK=64)),
    ])
    assert "[fp8, fp64] is unsupported on Ascend for now." in cast.message
    assert to.compiles, to.message  # .to() reaches the wheel's unpatched cast (its language/core.py:999)
    assert "Unsupported lhs dtype fp64" in dot.message
    assert not erfc.compiles and "erfc has no Ascend implementation" in erfc.message


def test_results_are_cached_by_what_was_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.empty(64)
    spec = ascend_compile.describe(K.add_kernel, dict(x_ptr=x, y_ptr=x, out_ptr=x, n=64, BLOCK=64))
    ascend_compile.check([spec])
    monkeypatch.setattr(ascend_compile, "_run_child", lambda req: pytest.fail("compiled again"))
    (r,) = ascend_compile.check([spec])
    assert r.compiles


def test_a_kernel_naming_a_torch_object_is_not_checkable() -> None:
    import types

    class _Jit:  # a kernel whose global is not rebuildable in the child
        fn = types.SimpleNamespace(__name__="k", __module__="m", __qualname__="k")
        src = "def k(x):\n    return torch.ones(1)\n"
        params: list = []

        def get_capture_scope(self) -> dict:
            return {"torch": torch}

    with pytest.raises(ascend_compile.NotCheckable, match="module torch"):
        ascend_compile.describe(_Jit(), {})


def test_surface_file_is_current() -> None:
    """ascend_surface.json is generated from the wheel: `python -m cudashim.triton_route.ascend_compile
    --write-surface`."""
    on_disk = json.loads(ascend_compile.SURFACE_PATH.read_text())
    assert on_disk == ascend_compile.surface()


def test_readiness_rows_say_whether_each_launched_kernel_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    from cudashim.triton_route import ascend

    monkeypatch.setenv("CUDASHIM_TRITON_ASCEND_COMPILE", "1")
    ascend.reset()
    x, y64 = torch.empty(64), torch.empty(64, dtype=torch.float64)
    try:
        ascend.check_launch(K.add_kernel, (2,), dict(x_ptr=x, y_ptr=x, out_ptr=x, n=64, BLOCK=32))
        ascend.check_launch(K.cast_fp64_kernel, (1,), dict(x_ptr=x, y_ptr=y64, n=64, BLOCK=64))
        rows = {r["kernel"].rsplit(":", 1)[1]: r for r in ascend.launches()}
    finally:
        ascend.reset()
    assert rows["add_kernel"]["compiles_for_ascend"] == "yes"
    verdict = rows["cast_fp64_kernel"]["compiles_for_ascend"]
    assert verdict.startswith("no (ttir: CompilationError") and "[fp8, fp64] is unsupported on Ascend" in verdict
    monkeypatch.delenv("CUDASHIM_TRITON_ASCEND_COMPILE")
    ascend.check_launch(K.add_kernel, (2,), dict(x_ptr=x, y_ptr=x, out_ptr=x, n=64, BLOCK=32))
    try:
        assert ascend.launches()[0]["compiles_for_ascend"] == "not checked"
    finally:
        ascend.reset()
