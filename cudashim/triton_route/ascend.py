"""Triton on the simulated NPU as triton-ascend would take it: its refusals, in its words, and its language.

On the simulated NPU a Triton launch runs through the same route as on the emulated device (launch.py,
Triton's interpreter, zero-copy). What runs there would meet triton-ascend 3.2.0 on a real NPU, so the
simulated NPU refuses and warns where it would (every message names the wheel file and line it quotes):

* a grid of more than 65,535 programs: `grid should be less than 65536! You can try "export
  TRITON_ALL_BLOCKS_PARALLEL=1" to avoid this problem.` (triton-ascend runtime/jit.py:688-690), unless
  TRITON_ALL_BLOCKS_PARALLEL is set as triton-ascend reads it;
* `triton.language.extra.libdevice` names outside the set the shim maps onto triton-ascend's own functions
  (ascend_compile.libdevice_module; the set is ascend_surface.json's `libdevice_mapped`, read from the wheel);
* `tl.cast` to or from fp8/fp64 (triton_patch/language/semantic.py:106-109, reached through the
  `tl.cast` triton-ascend installs, testing.py:723) and `tl.dot` operand types it asserts against
  (triton_patch/language/semantic.py:199-207) or an out_dtype of bf16 (semantic.py:232-234).
  `x.to(tl.float64)` is not refused: the wheel's `tensor.to` goes to its unpatched cast (language/core.py:999);
* a warning where a program's live tiles exceed the 192 KiB Unified Buffer of an Atlas A2 AI core: the
  interpreter sees every block it makes; the bytes of the value blocks (not pointer blocks, which lower to
  addresses) alive at once are counted, an estimate of what bishengir must place there, which reports
  `ub overflow` when it cannot. Only hardware (CANN's compiler) gives the exact use.

It also presents triton-ascend's language surface: the `triton.language.math` names triton-ascend adds
(testing.py:814-839: tanh, pow, isnan, ...) and `triton.language.extra.ascend.libdevice`, each computed by
the interpreter through the libdevice function of the same name, so a library's NPU branch
(`from triton.language.math import tanh`) imports and runs as it would on an NPU.
Triton 3.2's block pointers (`tl.make_block_ptr`, `tl.advance`, `boundary_check`, `padding_option`) are
part of that language; where the installed Triton removed them, block_ptr.py presents them. The cpu
platform does not get them: the emulated device stands for a GPU running the installed Triton, where a
kernel using them fails as it does there.

Each launch is recorded for the readiness report (report/readiness.py): launches, largest grid, call site,
and whether the kernel compiles for Ascend (ascend_compile, opt-in).

Verification level: L1s (the checks ran on the simulated NPU with the wheel's wording and names; nothing here
ran on an NPU).
"""

from __future__ import annotations

import ast
import functools
import json
import sys
import threading
import types
import warnings
import weakref
from typing import Any, Callable

from ..errors import CapabilityError
from . import ascend_compile, block_ptr
from .interpreter import _Scope

__all__ = [
    "GRID_LIMIT", "UB_BYTES", "UnifiedBufferWarning", "check_launch", "install", "uninstall", "installed",
    "launches", "libdevice_mapped", "reset",
]

#: triton-ascend's limit on grid_0 * grid_1 * grid_2 (runtime/jit.py:688-690)
GRID_LIMIT = 65535
#: the Unified Buffer of one Atlas A2 (910B) AI vector core, in bytes
UB_BYTES = 192 * 1024
_WHEEL = ascend_compile.WHEEL_SPEC
_LIBDEVICE_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                      "triton.language.extra.hip.libdevice")
_REFUSED_DOT = "int1 int8 uint8 fp16 bf16 fp32".split()


class UnifiedBufferWarning(UserWarning):
    """A program's live tiles exceed the Unified Buffer: bishengir-compile would report `ub overflow`."""


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.installed = False
        self.saved = _Scope()  # what install() replaced, put back by uninstall()
        self.kernel = "?"  # the kernel whose launch is running (for the UB warning)
        self.live = 0
        self.peak: dict[str, int] = {}
        self.ub_warned: set[str] = set()
        # kernel name -> [launches, largest grid (programs), grid of that launch, first call site, specs]
        self.launches: dict[str, list[Any]] = {}


_state = _State()


def reset() -> None:
    """Forget launches and warnings (tests)."""
    _state.launches.clear()
    _state.ub_warned.clear()
    _state.peak.clear()


@functools.lru_cache(maxsize=1)
def _surface() -> dict[str, Any]:
    return json.loads(ascend_compile.SURFACE_PATH.read_text())


def libdevice_mapped() -> frozenset[str]:
    """The libdevice names a kernel may call on Ascend (each mapped onto triton-ascend's own function)."""
    return frozenset(_surface()["libdevice_mapped"])


def _name(kernel: Any) -> str:
    fn = getattr(kernel, "fn", kernel)
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


# ---- before a launch -----------------------------------------------------------------------------------------

def _programs(grid: Any, bound_args: dict[str, Any]) -> tuple[int, tuple[int, ...]]:
    if callable(grid):
        grid = grid(bound_args)
    g = tuple(int(x) for x in grid) + (1, 1, 1)
    return g[0] * g[1] * g[2], tuple(int(x) for x in grid)


def _check_grid(name: str, programs: int, grid: tuple[int, ...]) -> None:
    from .. import envs

    # read as triton-ascend reads it (runtime/jit.py:688): unset or "0" keeps the limit
    if programs > GRID_LIMIT and (envs.raw("TRITON_ALL_BLOCKS_PARALLEL") or "0") == "0":
        raise CapabilityError(
            f"grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\" to avoid this "
            f"problem. -- Triton kernel {name} launched grid {grid} = {programs} programs; {_WHEEL} refuses more "
            f"than {GRID_LIMIT} (its runtime/jit.py:688-690); launch at most {GRID_LIMIT} programs and loop "
            "inside the kernel, or set TRITON_ALL_BLOCKS_PARALLEL=1 [simulated NPU]")


def _libdevice_calls(jf: Any, seen: set[int] | None = None) -> list[tuple[str, str]]:
    """(libdevice name, where) for each libdevice function the kernel and the @jit functions it calls name."""
    from triton.runtime.jit import JITFunction

    seen = set() if seen is None else seen
    if id(jf) in seen:
        return []
    seen.add(id(jf))
    scope = jf.get_capture_scope()
    where = _name(jf)
    out: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(jf.src)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in scope:
            v = scope[node.id]
            if isinstance(v, JITFunction):
                out += _libdevice_calls(v, seen)
            elif hasattr(v, "fn") and isinstance(getattr(v, "fn", None), JITFunction):
                out += _libdevice_calls(v.fn, seen)
            elif callable(v) and getattr(v, "__module__", None) in _LIBDEVICE_MODULES:
                out.append((getattr(v, "__name__", node.id), where))
        elif isinstance(node, ast.Attribute):
            base = _resolve(node.value, scope)
            if isinstance(base, types.ModuleType) and base.__name__ in _LIBDEVICE_MODULES:
                out.append((node.attr, where))
    return out


def _resolve(node: ast.AST, scope: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope)
        return getattr(base, node.attr, None) if base is not None else None
    return None


_unmapped_cache: dict[int, list[tuple[str, str]]] = {}


def _check_libdevice(kernel: Any, name: str) -> None:
    key = id(kernel)
    if key not in _unmapped_cache:
        mapped = libdevice_mapped()
        _unmapped_cache[key] = [(n, w) for n, w in _libdevice_calls(kernel) if n not in mapped]
    bad = _unmapped_cache[key]
    if bad:
        n, where = bad[0]
        raise CapabilityError(
            f"Triton kernel {name} calls triton.language.extra.libdevice.{n} (in {where}), which has no Ascend "
            f"implementation: {_WHEEL} maps libdevice onto nothing (backends/ascend/compiler.py:800-801) and the "
            f"shim maps only the names triton-ascend has in triton.language.extra.ascend.libdevice or "
            f"triton.language.math; write it with tl.* operations or one of those names [simulated NPU]")


def check_launch(kernel: Any, grid: Any, bound_args: dict[str, Any]) -> None:
    """The launch check of the simulated NPU (launch.py calls it before a launch executes): refuses what
    triton-ascend refuses before compiling, and records the launch for the readiness report."""
    name = _name(kernel)
    programs, g = _programs(grid, bound_args)
    _record(kernel, name, programs, g, bound_args)
    _check_grid(name, programs, g)
    _check_libdevice(kernel, name)
    _state.kernel = name


def _call_site() -> str:
    """The first line of user code that led to the launch; where none is on this thread's stack (autograd's
    backward thread), the first frame outside Triton, torch and the shim: the library's line that launched."""
    import os

    from .. import report

    site = report.call_site()
    import triton
    import torch

    shim = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    skip = (os.path.dirname(triton.__file__), os.path.dirname(torch.__file__), shim)
    if site is not None and not site.startswith(skip):
        return site
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(skip):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return site or "?"


def _record(kernel: Any, name: str, programs: int, grid: tuple[int, ...], bound_args: dict[str, Any]) -> None:
    with _state.lock:
        e = _state.launches.get(name)
        if e is None:
            e = _state.launches[name] = [0, 0, grid, _call_site(), {}]
        e[0] += 1
        if programs > e[1]:
            e[1], e[2] = programs, grid
    if ascend_compile.enabled():
        try:
            spec = ascend_compile.describe(kernel, bound_args)
        except ascend_compile.NotCheckable as exc:
            e[4].setdefault(f"not checkable: {exc}", exc)
        else:
            e[4].setdefault(spec.key(True), spec)


def launches() -> list[dict[str, Any]]:
    """Every kernel launched on the simulated NPU, for the readiness report; compiles each recorded
    specialization through the wheel's frontend when the check is on (one child, cached)."""
    with _state.lock:
        items = sorted((k, list(v[:4]), dict(v[4])) for k, v in _state.launches.items())
    specs = [s for _, _, d in items for s in d.values() if isinstance(s, ascend_compile.Spec)]
    failed = ""
    try:
        results = dict(zip(map(id, specs), ascend_compile.check(specs))) if specs else {}
    except Exception as exc:  # the wheel missing, the child failing: the report says so instead of breaking
        results, failed = {}, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    out = []
    for name, (n, programs, grid, site), recorded in items:
        if not ascend_compile.enabled():
            verdict = "not checked"
        else:
            lines = []
            for s in recorded.values():
                if isinstance(s, ascend_compile.Spec):
                    lines.append(results[id(s)].line() if id(s) in results else f"not checked ({failed})")
                else:
                    lines.append(f"not checked ({s})")
            # the worst specialization speaks for the kernel: a "no" before a "not checked"
            bad = sorted((x for x in lines if x != "yes"), key=lambda x: not x.startswith("no"))
            verdict = bad[0] if bad else ("yes" if lines else "not checked")
        out.append({"kernel": name, "launches": n, "largest_grid": list(grid), "largest_grid_programs": programs,
                    "first_call_site": site, "compiles_for_ascend": verdict})
    return out


# ---- during a launch: the interpreter's casts, dots and tiles -------------------------------------------------

def _scalar(ty: Any) -> Any:
    import triton.language as tl

    if isinstance(ty, tl.constexpr):
        ty = ty.value
    return getattr(ty, "scalar", ty)


def _refuse_cast(src: Any, dst: Any) -> None:
    if src is None or dst is None:
        return
    if src.is_fp8() or dst.is_fp8() or src.is_fp64() or dst.is_fp64():
        # the wheel's words (triton_patch/language/semantic.py:106-109), missing space included
        raise CapabilityError(
            "[fp8, fp64] is unsupported on Ascend for now.Source scalar type is " + str(src) + " and destination "
            f"type is {dst} -- Triton kernel {_state.kernel}: {_WHEEL} refuses this tl.cast "
            "(triton_patch/language/semantic.py:106-109); compute in fp32/fp16/bf16 [simulated NPU]")


def _refuse_dot(a: Any, b: Any, out_dtype: Any) -> None:
    if a is None or b is None:
        return
    if not (a.is_fp8() and b.is_fp8()):
        for which, t in (("lhs", a), ("rhs", b)):
            if t.name not in _REFUSED_DOT:
                raise CapabilityError(
                    f"Unsupported {which} dtype {t} -- Triton kernel {_state.kernel}: {_WHEEL}'s tl.dot takes "
                    "int1/int8/uint8/fp16/bf16/fp32 operands (triton_patch/language/semantic.py:203-206) "
                    "[simulated NPU]")
        if a != b:
            raise CapabilityError(
                f"Both operands must be same dtype. Got {a} and {b} -- Triton kernel {_state.kernel}: "
                f"{_WHEEL} (triton_patch/language/semantic.py:207) [simulated NPU]")
    if out_dtype is not None and out_dtype.is_bf16():
        raise CapabilityError(
            "out_dtype=bfloat16 is unsupported. Please use out_dtype=float32/float16 and cast with "
            f"`.to(tl.bfloat16)` -- Triton kernel {_state.kernel}: {_WHEEL} "
            "(triton_patch/language/semantic.py:232-234) [simulated NPU]")


def _builtin(fn: Callable[..., Any]) -> Callable[..., Any]:
    from triton.language import core

    setattr(fn, core.TRITON_BUILTIN, True)
    return fn


def _dtype_of(x: Any) -> Any:
    return _scalar(getattr(x, "dtype", None))


def _wrap_cast(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def cast(input: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: Any = False, **kw: Any) -> Any:
        if not getattr(bitcast, "value", bitcast):
            _refuse_cast(_dtype_of(input), _scalar(dtype))
        return original(input, dtype, fp_downcast_rounding, bitcast, **kw)

    return _builtin(cast)


def _wrap_dot(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def dot(input: Any, other: Any, *args: Any, **kw: Any) -> Any:
        out = kw.get("out_dtype", args[5] if len(args) > 5 else None)
        _refuse_dot(_dtype_of(input), _dtype_of(other), _scalar(out) if out is not None else None)
        return original(input, other, *args, **kw)

    return _builtin(dot)


def _track_tiles(original: Callable[..., Any] | None) -> Callable[..., Any]:
    def __post_init__(self: Any) -> None:
        if original is not None:
            original(self)
        data = getattr(self, "data", None)
        size = getattr(data, "size", 0)
        if size <= 1 or hasattr(self.dtype, "element_ty"):  # scalars, and pointer blocks (addresses)
            return
        n = int(data.nbytes)
        _state.live += n
        weakref.finalize(self, _release, n)
        if _state.live > _state.peak.get(_state.kernel, 0):
            _state.peak[_state.kernel] = _state.live
            if _state.live > UB_BYTES and _state.kernel not in _state.ub_warned:
                _state.ub_warned.add(_state.kernel)
                warnings.warn(
                    f"Triton kernel {_state.kernel}: a program's live tiles reach {_state.live // 1024} KiB, more "
                    f"than the {UB_BYTES // 1024} KiB Unified Buffer of an Ascend AI core; bishengir-compile may "
                    "fail there with `ub overflow`. Use smaller BLOCK sizes (loop over the row), or check on "
                    "hardware [simulated NPU; an estimate: the interpreter's value blocks alive at once, tl.dot's "
                    "included, where bishengir fuses, multi-buffers and places tiles its own way]",
                    UnifiedBufferWarning, stacklevel=2)

    return __post_init__


def _release(n: int) -> None:
    _state.live -= n


# ---- the language surface --------------------------------------------------------------------------------

def _surface_modules() -> list[tuple[Any, str, Any]]:
    """(owner, name, value) for triton-ascend's language names this Triton lacks."""
    import importlib

    import triton.language as tl

    try:
        cuda = importlib.import_module("triton.language.extra.cuda.libdevice")
    except ImportError:  # a Triton without CUDA's language module: nothing computes these names
        return []
    out: list[tuple[Any, str, Any]] = []
    for n in _surface()["math"]:
        if not hasattr(tl.math, n) and callable(getattr(cuda, n, None)):
            out.append((tl.math, n, getattr(cuda, n)))
    ascend_pkg = types.ModuleType("triton.language.extra.ascend", "triton-ascend's extra language (simulated NPU)")
    lib = types.ModuleType("triton.language.extra.ascend.libdevice",
                           "triton-ascend's libdevice names, computed by the interpreter (simulated NPU)")
    for n in _surface()["ascend_libdevice"]:
        f = getattr(cuda, n, None) or getattr(tl.math, n, None)
        if callable(f):
            setattr(lib, n, f)
    ascend_pkg.libdevice = lib  # type: ignore[attr-defined]
    out.append((sys.modules, "triton.language.extra.ascend", ascend_pkg))
    out.append((sys.modules, "triton.language.extra.ascend.libdevice", lib))
    out.append((importlib.import_module("triton.language.extra"), "ascend", ascend_pkg))
    return out


def _npu_properties(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """driver.active.utils.get_device_properties() with the keys triton-ascend's driver answers
    (backends/ascend/driver.py:80-86: num_aicore, and two vector cores per AI core), which NPU-aware
    libraries size their grids by."""

    @functools.wraps(original)
    def get_device_properties(self: Any, device: Any = None) -> dict[str, Any]:
        props = dict(original(self, device))
        aic = int(props.get("multiprocessor_count", 0))
        props.setdefault("num_aicore", aic)
        props.setdefault("num_vectorcore", 2 * aic)
        return props

    return get_device_properties


# ---- install ---------------------------------------------------------------------------------------------

def _set(owner: Any, name: str, value: Any) -> None:
    _state.saved.set(owner, name, value)


def installed() -> bool:
    return _state.installed


def install() -> None:
    """The simulated NPU's Triton: refusals in the interpreter, the Unified Buffer watch, triton-ascend's
    names. Idempotent; triton must be importable."""
    if _state.installed:
        return
    import triton.language as tl
    from triton.runtime import interpreter

    _state.installed = True
    try:
        plain = tl.core.cast
        cast, dot = _wrap_cast(plain), _wrap_dot(tl.core.dot)
        for owner in (tl, tl.core):
            _set(owner, "cast", cast)
            _set(owner, "dot", dot)
        member = _builtin(functools.wraps(tl.core.tensor.cast)(
            lambda self, *a, **k: cast(self, *a, **k)))
        _set(tl.core.tensor, "cast", member)
        # the wheel's tensor.to reaches its unpatched cast, which does not refuse (language/core.py:999)
        _set(tl.core.tensor, "to", _builtin(functools.wraps(tl.core.tensor.to)(
            lambda self, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None:
            plain(self, dtype, fp_downcast_rounding, bitcast, _semantic=_semantic))))
        handle = interpreter.TensorHandle
        _set(handle, "__post_init__", _track_tiles(vars(handle).get("__post_init__")))
        for owner, name, value in _surface_modules():
            _set(owner, name, value)
        # triton-ascend speaks Triton 3.2's language: block pointers, where the installed Triton removed them
        for owner, name, value in block_ptr.surface():
            _set(owner, name, value)
        from . import driver

        utils = driver._Utils
        _set(utils, "get_device_properties", _npu_properties(utils.get_device_properties))
        from .. import report

        if report.enabled():
            from ..report import readiness

            readiness.triton_source(launches)
    except BaseException:
        uninstall()
        raise


def uninstall() -> None:
    """Undo install(), in reverse order. Idempotent."""
    _state.saved.restore()
    _state.installed = False
    _unmapped_cache.clear()
