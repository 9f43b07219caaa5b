"""The migration report: which CUDA APIs the program touched and what the shim did with each.

Switched on by ``CUDASHIM_REPORT=path`` (``cudashim run --report path`` sets it); off by default,
and then it costs nothing: callers bind aliases through ``wrap()`` only when ``enabled()`` is True,
so with the report off no wrapper sits on any call path (benchmarks/bench_report.py measures it).

For every API: its treatment (native / aliased / emulated / unsupported), how many times it was
called and the first call site (``file:line``) in user code — frames inside cudashim, torch and
torch_npu are skipped, so the site is the line the user wrote. The patches the import hook applied
or stood in (``cudashim.patches.status()``) are included.

Output, once at exit (atexit): a JSON file plus a short table on stderr. One file per process:

* under ``torch.distributed`` (``WORLD_SIZE`` > 1), rank N writes ``<stem>.rank<N><suffix>``
  (``r.json`` → ``r.rank0.json``, ``r.rank1.json``); RANK comes from the environment (torchrun),
  else from ``torch.distributed.get_rank()`` when a process group is up;
* a multiprocessing child that is not a rank writes ``<stem>.pid<PID><suffix>`` so it never
  overwrites its parent's file, and only when it touched a CUDA API (DataLoader workers mostly don't);
* a rank-less process during whose run rank files of the same base appeared is the launcher of those
  ranks (``torchrun`` itself, shimmed like every Python process, probes device_count on its own) and
  writes nothing: ``--report r.json`` under ``torchrun --nproc-per-node 2`` gives exactly
  ``r.rank0.json`` and ``r.rank1.json``.

``CUDASHIM_REPORT=1`` means ``cudashim-report.json`` in the working directory.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from . import _state

__all__ = [
    "TREATMENTS",
    "enabled",
    "wrap",
    "record",
    "entries",
    "report_path",
    "snapshot",
    "write",
]

TREATMENTS = ("native", "aliased", "emulated", "unsupported")
_DEFAULT_NAME = "cudashim-report.json"

F = TypeVar("F", bound=Callable[..., Any])

# api -> [treatment, calls, first call site or None]; a list so the hot path mutates in place
_entries: dict[str, list[Any]] = {}
_enabled: bool | None = None  # None: not decided yet (decided at first use, from the environment)
_path: str | None = None
_atexit_registered = False
_written: str | None = None
_started = 0.0  # when the report was switched on in this process (rank files newer than this are this run's)
_lock = threading.Lock()

_SHIM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_getframe = sys._getframe


def _skip_dirs() -> tuple[str, ...]:
    # frames under these folders are the shim's or the framework's, never the user's call site;
    # looked up per first call (rare), so a torch imported later is still skipped
    dirs = [_SHIM_DIR]
    for name in ("torch", "torch_npu"):
        f = getattr(sys.modules.get(name), "__file__", None)
        if f:
            dirs.append(os.path.dirname(os.path.abspath(f)) + os.sep)
    return tuple(dirs)


_framework: tuple[str, ...] = ("<frozen",)  # torch's folders once wrap() has seen torch imported


def _from_program() -> bool:
    # who made this call: the first frame above the wrapper that is not torch's. The shim's own use
    # of an aliased API (directly, or through torch) is not the program's and is not counted.
    f = _getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(_SHIM_DIR):
            return False
        if not name.startswith(_framework):
            return True
        f = f.f_back
    return True


def enabled() -> bool:
    """True when CUDASHIM_REPORT is set; decided once per process (cheap afterwards)."""
    global _enabled, _path, _started
    if _enabled is None:
        from . import envs

        value = envs.get("CUDASHIM_REPORT")
        if not value or str(value).lower() in ("0", "false", "no", "off"):
            _enabled = False
        else:
            _path = _DEFAULT_NAME if str(value).lower() in ("1", "true", "yes", "on") else str(value)
            _enabled = True
            _started = time.time()
            _register_atexit()
    return _enabled


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_write_at_exit)
        _atexit_registered = True


def _check(treatment: str) -> None:
    if treatment not in TREATMENTS:
        raise ValueError(f"cudashim.report: treatment {treatment!r} is not one of {', '.join(TREATMENTS)}")


def _call_site() -> str | None:
    skip = _skip_dirs()
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(skip) and not filename.startswith("<frozen"):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _entry(api: str, treatment: str) -> list[Any]:
    e = _entries.get(api)
    if e is None:
        with _lock:
            e = _entries.setdefault(api, [treatment, 0, None])
    return e


def _hit(e: list[Any]) -> None:
    # the call site is looked up once, on the first call; afterwards a hit is one increment
    if e[2] is None:
        e[2] = _call_site() or "?"
    e[1] += 1


def record(api: str, treatment: str, *, count: bool = True) -> None:
    """Note that the program touched `api` (one call unless count=False); no-op when disabled."""
    if not enabled():
        return
    _check(treatment)
    e = _entry(api, treatment)
    if count:
        if e[2] is None:
            e[2] = _call_site() or "?"
        e[1] += 1


def wrap(api: str, treatment: str, fn: F) -> F:
    """`fn` counted under `api`: the calls and the first user call site are recorded.

    Calls made by cudashim itself (a stand-in using an aliased API, directly or through torch) are not
    counted: they are the shim's, not the program's. Calls torch makes on the program's behalf are.

    Functions get a functools.wraps wrapper. Classes keep their identity for isinstance(),
    subclassing and class attributes: the result is a subclass whose metaclass counts
    constructions and answers isinstance() for instances of the original class.
    Callers bind through wrap() only when enabled(); wrapping twice is harmless.
    """
    global _framework
    _check(treatment)
    enabled()  # decides the report path and registers the exit hook
    _framework = ("<frozen",) + _skip_dirs()[1:]  # torch is imported by the time aliases are bound
    e = _entry(api, treatment)
    if isinstance(fn, type):
        counted = _wrap_class(fn, e)
        if counted is not None:
            return counted  # type: ignore[return-value]
        record(api, treatment, count=False)
        return fn

    @functools.wraps(fn)
    def counted_call(*args: Any, **kwargs: Any) -> Any:
        if _from_program():
            _hit(e)
        return fn(*args, **kwargs)

    counted_call.__cudashim_report__ = api  # type: ignore[attr-defined]
    return counted_call  # type: ignore[return-value]


def _wrap_class(cls: type, e: list[Any]) -> type | None:
    meta = type(cls)

    def __call__(self: type, *args: Any, **kwargs: Any) -> Any:
        if self is counted:
            if _from_program():
                _hit(e)
            return cls(*args, **kwargs)
        return meta.__call__(self, *args, **kwargs)  # a user's subclass of the alias

    def __instancecheck__(self: type, inst: Any) -> bool:
        return isinstance(inst, cls) if self is counted else meta.__instancecheck__(self, inst)

    def __subclasscheck__(self: type, sub: type) -> bool:
        return issubclass(sub, cls) if self is counted else meta.__subclasscheck__(self, sub)

    try:
        counted_meta = type(meta)(
            "_Counted" + meta.__name__,
            (meta,),
            {"__call__": __call__, "__instancecheck__": __instancecheck__, "__subclasscheck__": __subclasscheck__},
        )
        counted = counted_meta(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
    except TypeError:  # final classes, exotic metaclasses: left as they are, listed without counts
        return None
    counted.__cudashim_report__ = e  # type: ignore[attr-defined]
    return counted


def entries() -> dict[str, dict[str, Any]]:
    """What has been recorded so far: api -> {treatment, calls, first_call_site}."""
    return {api: {"treatment": t, "calls": n, "first_call_site": site} for api, (t, n, site) in sorted(_entries.items())}


def _rank() -> tuple[int | None, int | None]:
    def _int(name: str) -> int | None:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            return None

    rank, world = _int("RANK"), _int("WORLD_SIZE")
    dist = sys.modules.get("torch.distributed")
    if rank is None and dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
        except Exception:  # a torn-down group at exit: fall back to "no rank"
            pass
    return rank, world


def report_path(base: str | None = None) -> str | None:
    """The file this process writes: the base path, suffixed per rank or per child process."""
    base = base if base is not None else (_path if enabled() else None)
    if base is None:
        return None
    p = Path(base)
    rank, world = _rank()
    if rank is not None and (world or 0) > 1:
        return str(p.with_name(f"{p.stem}.rank{rank}{p.suffix}"))
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return str(p.with_name(f"{p.stem}.pid{os.getpid()}{p.suffix}"))
    return str(p)


# The two lookups below read sys.modules on purpose: the report states what this process did, so a
# platform never built or patches never loaded are reported as such, not resolved or loaded now; and
# an import would make the report (which the alias layers import) depend on cudashim.patches.
def _platform_name() -> str | None:
    mod = sys.modules.get("cudashim.platform.contract")
    try:
        if mod is not None:
            return mod.get_platform().name
    except Exception:
        pass
    return os.environ.get("CUDASHIM_PLATFORM")


def _patch_status() -> list[dict[str, Any]]:
    mod = sys.modules.get("cudashim.patches._patch")  # the registry: loaded once a patch was installed
    status = getattr(mod, "status", None) if mod is not None else None
    if status is not None:
        try:
            return [dict(p) for p in status()]
        except Exception:
            pass
    return []


def snapshot() -> dict[str, Any]:
    """The report as a JSON-ready dict."""
    from . import __version__

    rank, world = _rank()
    recorded = entries()
    # an API is in the report when the program touched it; bound-but-unused aliases are only counted
    apis = [{"api": api, **info} for api, info in recorded.items() if info["calls"]]
    counts = {t: sum(1 for a in apis if a["treatment"] == t) for t in TREATMENTS}
    return {
        "cudashim": __version__,
        "platform": _platform_name(),
        # the simulated Ascend NPU (issue 19): nothing in the report is NPU behaviour
        "simulated": bool(getattr(sys.modules.get("cudashim.emulated.npu.device"), "started", lambda: False)()),
        "rank": rank,
        "world_size": world,
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "summary": counts,
        "bound": len(recorded),
        "apis": apis,
        "patches": _patch_status(),
    }


def _table(data: Mapping[str, Any], path: str, limit: int = 20) -> str:
    apis = data["apis"]
    summary = ", ".join(f"{n} {t}" for t, n in data["summary"].items() if n)
    where = (data["platform"] or "?") + (", SIMULATED NPU on the CPU" if data.get("simulated") else "")
    lines = [f"cudashim report ({where}): {len(apis)} CUDA APIs touched ({summary or 'none'}; "
             f"{data['bound']} in place) -> {path}"]
    for a in sorted(apis, key=lambda a: -a["calls"])[:limit]:
        lines.append(f"  {a['api']:<40} {a['treatment']:<11} {a['calls']:>8}  {a['first_call_site'] or ''}")
    if len(apis) > limit:
        lines.append(f"  ... {len(apis) - limit} more in the JSON file")
    patches = data["patches"]
    if patches:
        states: dict[str, int] = {}
        for p in patches:
            states[str(p.get("state"))] = states.get(str(p.get("state")), 0) + 1
        lines.append("  patches: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    return "\n".join(lines)


def _ranks_wrote_during_run(base: str) -> bool:
    p = Path(base)
    try:
        return any(f.stat().st_mtime >= _started - 1.0 for f in p.parent.glob(f"{p.stem}.rank*{p.suffix}"))
    except OSError:
        return False


def write(path: str | None = None, *, stderr: bool = True) -> str | None:
    """Write the JSON report (and the stderr table); returns the file written, None when disabled."""
    global _written
    target = report_path(path)
    if target is None:
        return None
    base = path if path is not None else _path
    if ".pid" in Path(target).stem and not any(e[1] for e in _entries.values()):
        return None  # a helper process (DataLoader worker, spawn child) that touched nothing: no file
    if base is not None and target == str(Path(base)) and _ranks_wrote_during_run(base):
        # the launcher of the ranks (torchrun's agent probes device_count itself): their files are the report
        return None
    data = snapshot()
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{target}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)  # a patch status may carry paths or objects
        f.write("\n")
    os.replace(tmp, target)  # a reader never sees half a file
    if stderr:
        print(_table(data, target), file=sys.stderr)
    _written = target
    return target


def _write_at_exit() -> None:
    if _enabled and _written is None:
        try:
            write()
        except Exception as exc:  # never turn a clean exit into a traceback because of the report
            print(f"cudashim report: could not write {_path!r}: {exc}", file=sys.stderr)


@_state.on_reset
def _reset() -> None:
    global _enabled, _path, _written
    _entries.clear()
    _enabled = None
    _path = None
    _written = None
