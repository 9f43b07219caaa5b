"""`triton.language.extra.libdevice` inside an interpreted launch.

Compiled, a libdevice call is an extern call into CUDA's libdevice; the backend swaps the stub module
(`triton.language.extra.libdevice`, whose functions are `...`) for its own (`extra.cuda.libdevice`,
each function a table from argument types to a `__nv_*` symbol and result type). The interpreter
does neither: the stubs return None and the builder refuses extern calls. Here the stubs a kernel
reaches become the CUDA module's functions (so Triton itself checks the types, broadcasts and picks
the symbol), and the interpreter's builder computes each `__nv_*` symbol with numpy, in the result
type the table gives. A symbol not in the table below raises CapabilityError at the call.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any, Callable

import numpy as np

from ..errors import CapabilityError
from . import _bf16

__all__ = ["patch", "SYMBOLS"]


def _round_half_away(x: Any) -> Any:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _vector(f: Callable[[float], float]) -> Callable[[Any], Any]:
    v = np.vectorize(f, otypes=[np.float64])
    return lambda x: v(np.asarray(x, dtype=np.float64))


_erf = _vector(math.erf)
_erfc = _vector(math.erfc)
_lgamma = _vector(math.lgamma)
_tgamma = _vector(math.gamma)

# libdevice name (without __nv_ and the f/d type suffix) -> numpy computation
SYMBOLS: dict[str, Callable[..., Any]] = {
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "rsqrt_rn": lambda x: 1.0 / np.sqrt(x),
    "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "sqrt_rd": np.sqrt, "sqrt_ru": np.sqrt, "sqrt_rz": np.sqrt,
    "cbrt": np.cbrt, "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "rcp_rn": lambda x: 1.0 / x, "rcp_rd": lambda x: 1.0 / x, "rcp_ru": lambda x: 1.0 / x, "rcp_rz": lambda x: 1.0 / x,
    "exp": np.exp, "fast_exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x),
    "fast_exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "fast_log": np.log, "log2": np.log2, "fast_log2": np.log2, "log10": np.log10,
    "fast_log10": np.log10, "log1p": np.log1p, "logb": lambda x: np.floor(np.log2(np.abs(x))),
    "pow": np.power, "fast_pow": np.power, "powi": np.power, "pown": np.power,
    "sin": np.sin, "fast_sin": np.sin, "cos": np.cos, "fast_cos": np.cos, "tan": np.tan, "fast_tan": np.tan,
    "sinpi": lambda x: np.sin(np.pi * x), "cospi": lambda x: np.cos(np.pi * x),
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "fast_tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf, "erfc": _erfc, "lgamma": _lgamma, "tgamma": _tgamma,
    "fabs": np.abs, "abs": np.abs, "llabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away,
    "rint": np.rint, "nearbyint": np.rint, "llrint": np.rint, "llround": _round_half_away,
    "fmod": np.fmod, "remainder": np.remainder, "fmin": np.fmin, "fmax": np.fmax, "fdim": lambda x, y: np.maximum(x - y, 0),
    "fma": lambda x, y, z: np.asarray(x, dtype=np.float64) * y + z, "fma_rn": lambda x, y, z: np.asarray(x, dtype=np.float64) * y + z,
    "hypot": np.hypot, "copysign": np.copysign, "nextafter": np.nextafter, "ldexp": lambda x, e: np.ldexp(x, e),
    "div_rn": np.divide, "div_rz": np.divide, "div_rd": np.divide, "div_ru": np.divide, "fast_divide": np.divide,
    "add_rn": np.add, "add_rz": np.add, "add_rd": np.add, "add_ru": np.add,
    "mul_rn": np.multiply, "mul_rz": np.multiply, "mul_rd": np.multiply, "mul_ru": np.multiply,
    "isnan": np.isnan, "isinf": np.isinf, "finite": np.isfinite, "isfinite": np.isfinite, "signbit": np.signbit,
    "saturate": lambda x: np.clip(x, 0.0, 1.0),
    "min": np.minimum, "max": np.maximum, "umin": np.minimum, "umax": np.maximum, "llmin": np.minimum,
    "llmax": np.maximum, "ullmin": np.minimum, "ullmax": np.maximum,
}


def _lookup(symbol: str) -> Callable[..., Any] | None:
    name = symbol[5:] if symbol.startswith("__nv_") else symbol
    if name in SYMBOLS:
        return SYMBOLS[name]
    if name[-1:] in ("f", "d") and name[:-1] in SYMBOLS:
        return SYMBOLS[name[:-1]]
    return None


def _extern_elementwise(kernel: Callable[[], Any]) -> Callable[..., Any]:
    def create_extern_elementwise(lib_name: str, lib_path: str, symbol: str, args: list[Any], ret_type: Any,
                                  is_pure: bool) -> Any:
        from triton.runtime import interpreter as m

        fn = _lookup(symbol)
        if fn is None:
            raise CapabilityError(
                f"Triton kernel {kernel()} calls libdevice {symbol}, which the emulated device's interpreter does "
                "not compute [capability triton_kernels]; map the kernel's Python entry point to portable code in "
                "[tool.cudashim.patches]")
        scalar = getattr(ret_type, "scalar", ret_type)
        np_type = m._get_np_dtype(scalar)
        datas = [_bf16.to_f32(a.data) if _bf16.is_bf16(a.dtype) else a.data for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*datas))
        if _bf16.is_bf16(scalar):
            return m.TensorHandle(_bf16.from_f32(out.astype(np.float32)), scalar)
        return m.TensorHandle(out.astype(np_type), scalar)

    return create_extern_elementwise


@functools.cache  # looked up at every launch: imported once
def _module(path: str) -> Any:
    try:
        return importlib.import_module(path)
    except ImportError:  # a Triton without that language module (the CUDA backend's, or the stub)
        return None


def _cuda_module() -> Any:
    return _module("triton.language.extra.cuda.libdevice")


def _stub_module() -> Any:
    return _module("triton.language.extra.libdevice")


def _with_semantic(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        from triton.runtime import interpreter as m

        kwargs.pop("_semantic", None)
        return fn(*args, _semantic=m.interpreter_semantic, **kwargs)

    call.__name__ = getattr(fn, "__name__", "libdevice")
    return call


def patch_builder(scope: Any, kernel: Callable[[], str] = lambda: "?") -> None:
    """For one launch: the builder's extern-elementwise operation computes (what a replayed batched run
    calls; the names in kernels' globals only matter where the kernel's Python runs)."""
    from triton.runtime import interpreter as m

    if _cuda_module() is None:
        return
    scope.set(m.interpreter_builder, "create_extern_elementwise", _extern_elementwise(kernel))


def patch(scope: Any, fn_globals: dict[str, Any], kernel: Callable[[], str] = lambda: "?") -> None:
    """For one launch: libdevice names in fn_globals (and the libdevice modules' attributes) compute."""
    from triton.runtime import interpreter as m

    cuda, stub = _cuda_module(), _stub_module()
    if cuda is None:
        return
    patch_builder(scope, kernel)
    modules = tuple(x for x in (cuda, stub) if x is not None)
    names = {getattr(x, "__name__", "") for x in modules}

    def replacement(name: str) -> Any:
        target = getattr(cuda, name, None)
        return _with_semantic(target) if callable(target) else None

    for key, value in list(fn_globals.items()):
        if callable(value) and getattr(value, "__module__", None) in names and not isinstance(value, type):
            new = replacement(getattr(value, "__name__", key))
            if new is not None:
                scope.set(fn_globals, key, new)
    for mod in modules:  # reached as a module too: `libdevice.rsqrt`, `tl.extra.cuda.libdevice.rsqrt`
        if not getattr(mod, "_cudashim_patched", False):
            scope.set(mod, "_cudashim_patched", True)
            for name in [n for n in dir(cuda) if not n.startswith("_")]:
                new = replacement(name)
                if new is not None and hasattr(mod, name):
                    scope.set(mod, name, new)
