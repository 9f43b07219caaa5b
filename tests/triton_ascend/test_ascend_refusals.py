"""The simulated NPU refuses and warns where triton-ascend 3.2.0 would, in its words (quoted from the wheel:
each test reads the line it cites out of the wheel and finds it in the message).

These run the checks on Triton's interpreter in this process (triton_route/ascend.py installed and removed
around each test); tests/simulated/test_triton_sim.py runs them end to end on the simulated NPU.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import _kernels as K
from _ta import need_wheel, wheel_line, wheel_string

from cudashim.errors import CapabilityError
from cudashim.triton_route import ascend


@pytest.fixture(autouse=True)
def _checks() -> Any:
    ascend.install()
    ascend.reset()
    yield
    ascend.uninstall()
    ascend.reset()


def _launch(kernel: Any, grid: tuple[int, ...], **args: Any) -> None:
    """What the route does: the launch check, then the interpreter (unwrapping a refusal, as launch.py does)."""
    from triton.runtime.interpreter import InterpretedFunction, InterpreterError

    ascend.check_launch(kernel, grid, args)
    try:
        InterpretedFunction(kernel.fn)[grid](**args)
    except InterpreterError as e:
        if isinstance(e.__cause__, CapabilityError):
            raise e.__cause__ from None
        raise


def test_grid_of_70000_programs_is_refused_in_triton_ascends_words(monkeypatch: pytest.MonkeyPatch) -> None:
    words = wheel_string("triton/runtime/jit.py", 690)
    assert "65536" in words and "TRITON_ALL_BLOCKS_PARALLEL" in words
    monkeypatch.delenv("TRITON_ALL_BLOCKS_PARALLEL", raising=False)
    x = torch.zeros(70_000)
    with pytest.raises(CapabilityError) as e:
        _launch(K.add_kernel, (70_000,), x_ptr=x, y_ptr=x, out_ptr=x, n=70_000, BLOCK=1)
    assert words in str(e.value) and "add_kernel" in str(e.value)
    # 65,535 programs pass the check (runtime/jit.py:689: `> 65535`)
    assert "65535" in wheel_line("triton/runtime/jit.py", 689)
    ascend.check_launch(K.add_kernel, (65_535,), {})
    # and the wheel's way out is honoured as the wheel reads it (runtime/jit.py:688)
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    ascend.check_launch(K.add_kernel, (70_000,), {})


def test_an_unmapped_libdevice_call_is_refused() -> None:
    need_wheel()
    assert wheel_line("triton/backends/ascend/compiler.py", 801).strip() == "return {}"
    x = torch.rand(64)
    assert "erfc" not in ascend.libdevice_mapped() and "rsqrt" in ascend.libdevice_mapped()
    with pytest.raises(CapabilityError, match=r"libdevice\.erfc .*no Ascend implementation.*compiler\.py:800"):
        _launch(K.erfc_kernel, (1,), x_ptr=x, y_ptr=x, n=64, BLOCK=64)
    ascend.check_launch(K.rsqrt_kernel, (1,), {})  # a mapped name passes


def test_an_fp64_cast_is_refused_in_triton_ascends_words() -> None:
    words = wheel_string("triton/triton_patch/language/semantic.py", 108)
    assert words == "[fp8, fp64] is unsupported on Ascend for now."
    x, y = torch.rand(64), torch.zeros(64, dtype=torch.float64)
    with pytest.raises(CapabilityError) as e:
        _launch(K.cast_fp64_kernel, (1,), x_ptr=x, y_ptr=y, n=64, BLOCK=64)
    assert words + "Source scalar type is fp32 and destination type is fp64" in str(e.value)
    # x.to(tl.float64) passes the wheel's frontend (tensor.to reaches its unpatched cast): not refused
    _launch(K.to_fp64_kernel, (1,), x_ptr=x, y_ptr=y, n=64, BLOCK=64)
    assert torch.equal(y, x.double())


def test_dot_operand_types_triton_ascend_refuses() -> None:
    words = wheel_string("triton/triton_patch/language/semantic.py", 204)
    assert words == "Unsupported lhs dtype "
    a = torch.rand(256, dtype=torch.float64)
    with pytest.raises(CapabilityError, match=words + "fp64"):
        _launch(K.dot_kernel, (1,), a_ptr=a, c_ptr=torch.zeros_like(a), BLOCK=16)
    f = torch.rand(256)
    c = torch.zeros_like(f)
    _launch(K.dot_kernel, (1,), a_ptr=f, c_ptr=c, BLOCK=16)  # fp32 operands are taken
    torch.testing.assert_close(c.view(16, 16), f.view(16, 16) @ f.view(16, 16))


def test_tiles_beyond_the_unified_buffer_warn() -> None:
    # three fp32 rows of 32,768 elements alive at once: 384 KiB, over the 192 KiB Unified Buffer
    x = torch.rand(32_768)
    y = torch.zeros_like(x)
    with pytest.warns(ascend.UnifiedBufferWarning, match=r"wide_row_kernel.*192 KiB Unified Buffer"):
        _launch(K.wide_row_kernel, (1,), x_ptr=x, y_ptr=y, BLOCK=32_768)
    assert torch.equal(y, x * 3)  # a warning, not a refusal: the launch ran
    # the same kernel on rows that fit says nothing
    ascend.reset()
    small = torch.rand(4096)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ascend.UnifiedBufferWarning)
        _launch(K.wide_row_kernel, (1,), x_ptr=small, y_ptr=torch.zeros_like(small), BLOCK=4096)


def test_triton_ascends_language_names_are_presented() -> None:
    import triton.language as tl

    # a name triton-ascend adds to triton.language.math (testing.py:826) that upstream Triton lacks
    assert "language.math.tanh" in wheel_line("triton/testing.py", 826)
    from triton.language.math import tanh  # noqa: F401  (an NPU-aware library's import)
    from triton.language.extra.ascend import libdevice

    assert callable(tl.math.tanh) and callable(libdevice.tanh) and callable(libdevice.rsqrt)
    ascend.uninstall()
    assert not hasattr(tl.math, "tanh")  # uninstall puts upstream's surface back
    with pytest.raises(ImportError):
        from triton.language.extra.ascend import libdevice as _  # noqa: F401


def test_launches_are_recorded_for_the_readiness_report() -> None:
    x = torch.rand(1024)
    for grid in ((4,), (8,)):
        _launch(K.add_kernel, grid, x_ptr=x, y_ptr=x, out_ptr=torch.empty_like(x), n=1024, BLOCK=128)
    (row,) = [r for r in ascend.launches() if r["kernel"].endswith(":add_kernel")]
    assert row["launches"] == 2 and row["largest_grid"] == [8] and row["largest_grid_programs"] == 8
    assert row["compiles_for_ascend"] == "not checked"
    assert row["first_call_site"].endswith(f"{__file__.rsplit('/', 1)[-1]}:{_launch.__code__.co_firstlineno + 4}")
