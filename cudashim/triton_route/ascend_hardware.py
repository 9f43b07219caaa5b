"""Triton on a real Ascend NPU: triton-ascend when it is installed, a CapabilityError naming it when it is not.

* Upstream Triton (no `triton.backends.ascend`): it has no NPU backend, and CUDA looks available under
  transfer_to_npu, so the first launch would die on Triton's `libcuda.so cannot found!`. Instead the first
  launch, and anything that asks Triton's driver (`triton.runtime.driver.active`: the tutorials' first line,
  an autotuner's benchmark), raise a CapabilityError naming `pip install triton-ascend` and the CANN
  environment it needs.
* triton-ascend (installs as the package `triton`): CUDA-written launches run on the NPU as they are; under
  transfer_to_npu their `cuda` tensors are NPU tensors and triton-ascend's driver takes the device and
  stream from torch.npu. Two gaps are filled: `triton.language.extra.libdevice`, which triton-ascend maps
  onto nothing (backends/ascend/compiler.py:800-801), is mapped onto its own functions
  (ascend_compile.libdevice_module), and `triton.language.extra.cuda.libdevice`, which it does not ship, is
  an alias of the generic module so `from triton.language.extra.cuda import libdevice` imports. Its own
  refusals (the grid limit, fp8/fp64 casts, ...) reach the user as it raises them, with their way out.

Verification level: L1 (tests compose this with the triton-ascend 3.2.0 wheel's Python files and frontend on
a machine without an NPU; no launch ran on an NPU).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, Callable, NoReturn

from ..errors import CapabilityError
from .ascend_compile import WHEEL_SPEC, libdevice_module

__all__ = ["is_triton_ascend", "install", "uninstall", "WAY_OUT"]

WAY_OUT = (f"install triton-ascend (pip install {WHEEL_SPEC}; it replaces the package triton) and source the CANN "
           "environment it compiles with (source /usr/local/Ascend/ascend-toolkit/set_env.sh: bishengir-compile "
           "and bisheng on PATH, with torch_npu installed)")

_undo: list[Callable[[], None]] = []


def is_triton_ascend() -> bool:
    """Whether the installed `triton` is triton-ascend (it ships backends/ascend), without importing it."""
    try:
        return importlib.util.find_spec("triton.backends.ascend") is not None
    except (ImportError, ValueError):
        return False


def _refuse(what: str) -> NoReturn:
    import triton

    raise CapabilityError(f"{what} cannot run on ascend with triton {getattr(triton, '__version__', '?')}, which "
                          f"has no NPU backend; {WAY_OUT} [capability triton_kernels]")


class _NoNPUDriver:
    """triton.runtime.driver.active on ascend without triton-ascend: every question raises."""

    def __getattr__(self, name: str) -> NoReturn:
        _refuse(f"triton.runtime.driver.active.{name}")


def _refusals() -> None:
    from triton.runtime.jit import JITFunction

    original_run = JITFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
        fn = getattr(self, "fn", None)
        _refuse(f"Triton kernel {getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}")

    run.__wrapped__ = original_run  # type: ignore[attr-defined]
    JITFunction.run = run  # type: ignore[method-assign]
    cfg = importlib.import_module("triton.runtime.driver").driver
    previous = cfg._active
    cfg.set_active(_NoNPUDriver())

    def undo() -> None:
        JITFunction.run = original_run  # type: ignore[method-assign]
        cfg._active = previous

    _undo.append(undo)


def _map_libdevice(triton: Any) -> None:
    from triton.backends import backends

    backend = backends.get("ascend")
    compiler = getattr(backend, "compiler", None)
    if compiler is None:  # the wheel's layout changed: its own get_module_map stays
        return
    original = compiler.get_module_map
    mapped: dict[str, Any] = {}

    def get_module_map(self: Any) -> dict[str, Any]:
        if not mapped:
            mapped["triton.language.extra.libdevice"] = libdevice_module(triton)
        return {**original(self), **mapped}

    compiler.get_module_map = get_module_map
    _undo.append(lambda: setattr(compiler, "get_module_map", original))

    generic = importlib.import_module("triton.language.extra.libdevice")
    if "triton.language.extra.cuda" not in sys.modules and importlib.util.find_spec(
            "triton.language.extra.cuda") is None:
        cuda = types.ModuleType("triton.language.extra.cuda", "CUDA's libdevice spelling, mapped onto triton-ascend")
        cuda.libdevice = generic  # type: ignore[attr-defined]
        sys.modules["triton.language.extra.cuda"] = cuda
        sys.modules["triton.language.extra.cuda.libdevice"] = generic

        def drop() -> None:
            sys.modules.pop("triton.language.extra.cuda", None)
            sys.modules.pop("triton.language.extra.cuda.libdevice", None)

        _undo.append(drop)


def install(triton: Any) -> None:
    """Once `triton` is imported on a real NPU host: triton-ascend wired, or upstream Triton refused."""
    if _undo:
        return
    if is_triton_ascend():
        _map_libdevice(triton)
    else:
        _refusals()


def uninstall() -> None:
    while _undo:
        _undo.pop()()
