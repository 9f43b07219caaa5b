"""The one seam every Triton launch on the emulated device goes through (JITFunction.run).

    launch(kernel, args, kwargs, grid, warmup)
      1. what cannot run here fails now: warmup() and compiled-kernel introspection (CapabilityError
         naming the kernel and the patch map);
      2. the arguments are bound as the compiler binds them (defaults, launch options dropped), the
         kernel's pre-run hooks run, the grid is evaluated on the bound arguments;
      3. the platform's launch checks see (kernel, grid, bound arguments) before anything runs
         (add_launch_check: the simulated NPU's triton-ascend rules plug in here);
      4. inside a CUDA-graph capture the launch is recorded through the device's graph recorder and
         replay runs it again on the memory's contents then (graph scalars are fixed, as on CUDA);
      5. EXECUTE: each registered executor (add_executor) is tried in order; one answers None when it
         ran the launch or a reason string when it leaves it; Triton's interpreter, in place, runs
         what none took (interpreter.execute). Which path ran, and why, is counted for the report.
The report (cudashim run --report) lists each kernel: launches, grid sizes, time, paths and a
patch-map line for the function that launched it.
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any, Callable

from ..errors import CapabilityError

__all__ = ["launch", "add_launch_check", "remove_launch_check", "add_executor", "remove_executor", "execute",
           "stats", "configure", "reset", "LaunchedKernel", "INTERPRETER"]

INTERPRETER = "interpreter"

# Executor: (kernel, bound arguments by name, grid (x, y, z)) -> None when it ran the launch, else why not
Executor = Callable[[Any, "dict[str, Any]", "tuple[int, int, int]"], "str | None"]
LaunchCheck = Callable[[Any, "tuple[int, int, int]", "dict[str, Any]"], None]

_executors: list[tuple[str, Executor]] = []
_checks: dict[str, list[LaunchCheck]] = {}
_config: dict[str, Any] = {"platform": "cpu", "device_type": "cuda", "capturing": None}
_stats: dict[str, dict[str, Any]] = {}
_signatures: dict[int, tuple[Any, inspect.Signature]] = {}
_graph_calls: dict[tuple[Any, ...], Callable[..., None]] = {}


def configure(platform: str, device_type: str, capturing: Callable[[], bool] | None) -> None:
    _config.update(platform=platform, device_type=device_type, capturing=capturing)


def add_launch_check(platform: str, check: LaunchCheck) -> None:
    """check(kernel, grid, bound_args) before every launch on `platform`; it raises to refuse."""
    if check not in _checks.setdefault(platform, []):
        _checks[platform].append(check)


def remove_launch_check(platform: str, check: LaunchCheck) -> None:
    if check in _checks.get(platform, []):
        _checks[platform].remove(check)


def add_executor(name: str, executor: Executor) -> None:
    """A faster way to run a launch, tried before the interpreter (first added, first tried)."""
    remove_executor(name)
    _executors.append((name, executor))


def remove_executor(name: str) -> None:
    _executors[:] = [(n, e) for n, e in _executors if n != name]


def kernel_name(kernel: Any) -> str:
    fn = getattr(kernel, "fn", kernel)
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


_PATCH_WAY = "map the Python function that launches it to portable code in [tool.cudashim.patches]"


class LaunchedKernel:
    """What kernel[grid](...) returns here: there is no compiled kernel to introspect."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_platform", _config["platform"])

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise CapabilityError(
            f"Triton kernel {self._name}: .{attr} reads the compiled kernel, and on the emulated device "
            f"({self._platform} platform) a launch is interpreted, never compiled [capability triton_kernels]; {_PATCH_WAY}")

    def __repr__(self) -> str:
        return f"<interpreted launch of {self._name}>"


_EMPTY = inspect.Parameter.empty


def _binder(kernel: Any) -> tuple[Any, inspect.Signature, tuple[tuple[str, Any], ...] | None]:
    """(kernel, its signature, (name, default) per parameter where every one is plain positional-or-keyword,
    else None): what binding a launch's arguments needs, worked out once per kernel."""
    hit = _signatures.get(id(kernel))
    if hit is None or hit[0] is not kernel:
        sig = inspect.signature(kernel.fn)
        plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())
        params = tuple((n, p.default) for n, p in sig.parameters.items()) if plain else None
        hit = _signatures[id(kernel)] = (kernel, sig, params)
    return hit


def _bind(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> dict[str, Any]:
    """The arguments by parameter name, in the parameters' order, defaults applied; keywords that are
    no parameter (launch options) dropped."""
    _, sig, params = _binder(kernel)
    if params is not None and len(args) <= len(params):
        bound = {}
        for i, (n, default) in enumerate(params):
            if i < len(args):
                if n in kwargs:
                    break  # given twice: the signature's error below
                bound[n] = args[i]
            elif n in kwargs:
                bound[n] = kwargs[n]
            elif default is not _EMPTY:
                bound[n] = default
            else:
                break  # missing: the signature's error below
        else:
            return bound
    try:
        bound_sig = sig.bind(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
    except TypeError as e:
        raise TypeError(f"Triton kernel {name}: {e}") from None
    bound_sig.apply_defaults()
    return dict(bound_sig.arguments)


def _grid(grid: Any, bound: dict[str, Any], name: str) -> tuple[int, int, int]:
    g = grid(bound) if callable(grid) else grid
    if isinstance(g, int):
        g = (g,)
    try:
        dims = tuple(int(x) for x in g)
    except TypeError as e:
        raise TypeError(f"Triton kernel {name}: the grid must be a tuple of up to 3 ints (or a function of the "
                        f"arguments returning one), got {g!r}") from e
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"Triton kernel {name}: the grid must have 1 to 3 dimensions, got {dims!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


def _launcher_site() -> str | None:
    """The Python function (module:qualname) that launched the kernel: the first frame outside Triton
    and the shim; the patch map replaces that function."""
    f = sys._getframe(2)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if not (mod == "triton" or mod.startswith(("triton.", "cudashim.", "torch."))):
            qual = getattr(f.f_code, "co_qualname", f.f_code.co_name)
            return f"{mod}:{qual}"
        f = f.f_back
    return None


def _entry(name: str) -> dict[str, Any]:
    e = _stats.get(name)
    if e is None:
        e = _stats[name] = {"kernel": name, "launches": 0, "recorded": 0, "replayed": 0, "time_s": 0.0, "grids": {}, "paths": {},
                            "launched_by": None}
    return e


def execute(kernel: Any, bound: dict[str, Any], grid: tuple[int, int, int], device_type: str | None) -> str:
    """EXECUTE: the faster executors first, the exact interpreter for what none took. Returns the path
    that ran ("interpreter" or an executor's name) and, after a '|', the reasons executors gave."""
    from . import interpreter  # numpy and Triton's interpreter: loaded at the first launch, not at start-up

    reasons = []
    if device_type is not None and _executors:  # before any executor touches the memory
        for i, a in enumerate(bound.values()):
            if a.__class__ not in _SCALARS:
                interpreter._device_check(a, i, device_type)
    for name, executor in _executors:
        reason = executor(kernel, bound, grid)
        if reason is None:
            return name
        reasons.append(f"{name}: {reason}")
    interpreter.execute(kernel, (), bound, grid, device_type)
    return INTERPRETER + ("|" + "; ".join(reasons) if reasons else "")


_SCALARS = frozenset([int, float, bool, str, type(None)])  # arguments that live on no device


def _graph_call(kernel: Any, names: tuple[str, ...], grid: tuple[int, int, int]) -> Callable[..., None]:
    key = (id(kernel), names, grid)
    call = _graph_calls.get(key)
    if call is None:
        e = _entry(kernel_name(kernel))

        def call(*values: Any) -> None:
            # at replay the recorder hands CPU views of the device's memory: any device is taken
            t0 = time.perf_counter()
            path = execute(kernel, dict(zip(names, values)), grid, None)
            e["time_s"] += time.perf_counter() - t0
            e["replayed"] += 1
            e["paths"][path] = e["paths"].get(path, 0) + 1

        _graph_calls[key] = call
    return call


def _record(kernel: Any, bound: dict[str, Any], grid: tuple[int, int, int]) -> None:
    import torch

    from ..emulated import graph_kernels

    names = tuple(bound)
    values = tuple(bound.values())
    for v in values:
        if not isinstance(v, (torch.Tensor, int, float, bool, str, type(None))) and not _hashable(v):
            raise CapabilityError(f"Triton kernel {kernel_name(kernel)}: argument {v!r} cannot be fixed in a CUDA "
                                  "graph on the emulated device [capability triton_kernels]")
    kinds = "".join("w" if isinstance(v, torch.Tensor) else "s" for v in values)  # unknown writes: all written
    graph_kernels.launch(_graph_call(kernel, names, grid), kinds, *values)


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def launch(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any, warmup: bool) -> Any:
    name = kernel_name(kernel)
    if warmup:
        raise CapabilityError(
            f"Triton kernel {name}: warmup() compiles the kernel and returns the compiled kernel, and on the emulated "
            f"device ({_config['platform']} platform) a launch is interpreted, never compiled [capability triton_kernels]; {_PATCH_WAY}")
    bound = _bind(kernel, args, kwargs, name)
    for hook in getattr(kernel, "pre_run_hooks", ()):
        hook(*args, **kwargs)
    dims = _grid(grid, bound, name)
    for check in _checks.get(_config["platform"], ()):
        check(kernel, dims, bound)
    e = _entry(name)
    if e["launched_by"] is None:
        e["launched_by"] = _launcher_site()
    g = "x".join(map(str, dims))
    e["grids"][g] = e["grids"].get(g, 0) + 1
    capturing = _config["capturing"]
    if capturing is not None and capturing():
        _record(kernel, bound, dims)
        e["recorded"] += 1
        return LaunchedKernel(name)
    if any(d == 0 for d in dims):
        return LaunchedKernel(name)  # an empty grid launches nothing, as on CUDA
    t0 = time.perf_counter()
    path = execute(kernel, bound, dims, _config["device_type"])
    e["time_s"] += time.perf_counter() - t0
    e["launches"] += 1
    e["paths"][path] = e["paths"].get(path, 0) + 1
    return LaunchedKernel(name)


def stats() -> list[dict[str, Any]]:
    """Per kernel, for the report: launches, graph recordings and replays, grid sizes, time, paths, a patch-map line."""
    out = []
    for e in _stats.values():
        site = e["launched_by"]
        line = f'"{site}" = "your_module:{site.rpartition(":")[2].rpartition(".")[2]}"' if site else None
        out.append({**e, "grids": dict(e["grids"]), "paths": dict(e["paths"]), "time_s": round(e["time_s"], 6),
                    "patch_map_line": line})
    return out


def reset() -> None:
    _stats.clear()
    _graph_calls.clear()
    _signatures.clear()
