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
* the first process that switches the report on owns the base name and says so to its children
  (``CUDASHIM_REPORT_OWNER``, its pid); any other process (a subprocess, a multiprocessing child)
  writes ``<stem>.pid<PID><suffix>``, and only when it touched a CUDA API (DataLoader workers
  mostly don't), so it never overwrites its parent's file;
* unrelated processes given the same path at the same time (50 jobs of a shell loop) each keep
  their report: the base name is claimed with an exclusive link, and a process that finds it
  written during its own run writes its ``.pid<PID>`` file instead (a file from an earlier run is
  replaced);
* a rank-less process during whose run rank files of the same base appeared is the launcher of those
  ranks (``torchrun`` itself, shimmed like every Python process, probes device_count on its own) and
  writes nothing: ``--report r.json`` under ``torchrun --nproc-per-node 2`` gives exactly
  ``r.rank0.json`` and ``r.rank1.json``.

Files are private: the temporary is created exclusively (never through a planted link) with mode
0600 and renamed into place. The program's arguments may hold secrets, so only ``argv[0]`` is
recorded unless ``CUDASHIM_REPORT_ARGS=1``. The call site is the first frame in the user's own
code: the shim's, torch's and anything under a ``site-packages`` / ``dist-packages`` folder is
skipped (a library's frame is shown only when no user frame called it).

``CUDASHIM_REPORT=1`` means ``cudashim-report.json`` in the working directory.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from .. import _state
from . import _calls, _files
from ._calls import call_site

__all__ = [
    "TREATMENTS",
    "enabled",
    "wrap",
    "record",
    "entries",
    "report_path",
    "snapshot",
    "write",
    "add_section",
    "call_site",
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
_OWNER = "CUDASHIM_REPORT_OWNER"  # pid of the process that writes the base name; its children inherit it
_owner = True  # this process owns the base name (decided with _enabled)
_set_owner: str | None = None  # the CUDASHIM_REPORT_OWNER value this process put in the environment
_lock = threading.Lock()
# name -> (the section's JSON value at write time, its one-line summary for stderr or None)
_sections: dict[str, tuple[Callable[[], Any], Callable[[Any], str | None] | None]] = {}

def enabled() -> bool:
    """True when CUDASHIM_REPORT is set; decided once per process (cheap afterwards)."""
    global _enabled, _path, _started
    if _enabled is None:
        from .. import envs

        value = envs.get("CUDASHIM_REPORT")
        if not value or str(value).lower() in ("0", "false", "no", "off"):
            _enabled = False
        else:
            _path = _DEFAULT_NAME if str(value).lower() in ("1", "true", "yes", "on") else str(value)
            _enabled = True
            _started = time.time()
            _claim_owner()
            _register_atexit()
    return _enabled


def _claim_owner() -> None:
    global _owner, _set_owner
    pid = str(os.getpid())
    owner = os.environ.get(_OWNER)
    if owner is None:
        import multiprocessing

        owner = pid if multiprocessing.parent_process() is None else ""
        os.environ[_OWNER] = _set_owner = pid  # what every child of this process inherits
    _owner = owner == pid


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_write_at_exit)
        _atexit_registered = True


def _check(treatment: str) -> None:
    if treatment not in TREATMENTS:
        raise ValueError(f"cudashim.report: treatment {treatment!r} is not one of {', '.join(TREATMENTS)}")


def _entry(api: str, treatment: str) -> list[Any]:
    e = _entries.get(api)
    if e is None:
        with _lock:
            e = _entries.setdefault(api, [treatment, 0, None])
    return e


def record(api: str, treatment: str, *, count: bool = True) -> None:
    """Note that the program touched `api` (one call unless count=False); no-op when disabled."""
    if not enabled():
        return
    _check(treatment)
    e = _entry(api, treatment)
    if count:
        if e[2] is None:
            e[2] = _calls.call_site() or "?"
        e[1] += 1


def wrap(api: str, treatment: str, fn: F, when: Callable[[tuple[Any, ...], dict[str, Any]], bool] | None = None) -> F:
    """`fn` counted under `api`: the calls and the first user call site are recorded.

    With `when(args, kwargs)`, only the calls it accepts count: a factory is CUDA's only when it was
    given a CUDA device (`torch.ones(3)` makes a CPU tensor and touched no CUDA API).

    Calls made by cudashim itself (a stand-in using an aliased API, directly or through torch) are not
    counted: they are the shim's, not the program's. Calls torch makes on the program's behalf are.

    Functions get a functools.wraps wrapper. Classes keep their identity for isinstance(),
    subclassing and class attributes: the result is a subclass whose metaclass counts
    constructions and answers isinstance() for instances of the original class.
    Callers bind through wrap() only when enabled(); wrapping twice is harmless.
    """
    _check(treatment)
    enabled()  # decides the report path and registers the exit hook
    _calls.see_framework()
    e = _entry(api, treatment)
    if isinstance(fn, type):
        counted = _calls.count_constructions(fn, e)
        if counted is not None:
            return counted  # type: ignore[return-value]
        record(api, treatment, count=False)
        return fn
    counted_call = _calls.count_calls(fn, e, when)
    counted_call.__cudashim_report__ = api  # type: ignore[attr-defined]
    return counted_call  # type: ignore[return-value]


def entries() -> dict[str, dict[str, Any]]:
    """What has been recorded so far: api -> {treatment, calls, first_call_site}."""
    return {api: {"treatment": t, "calls": n, "first_call_site": site} for api, (t, n, site) in sorted(_entries.items())}


def report_path(base: str | None = None) -> str | None:
    """The file this process writes: the base path, suffixed per rank or per child process."""
    base = base if base is not None else (_path if enabled() else None)
    return None if base is None else _files.ranked_path(base, _owner)


# The two lookups below read sys.modules on purpose: the report states what this process did, so a
# platform never built or patches never loaded are reported as such, not resolved or loaded now; and
# an import would make the report (which the installers import) depend on cudashim.patches.
def _platform_name() -> str | None:
    settled = getattr(sys.modules.get("cudashim.platform"), "settled", None)
    if settled is not None and settled() is not None:  # the activation's platform, built or not
        return settled()
    mod = sys.modules.get("cudashim.platform.contract")
    try:
        if mod is not None:
            return mod.get_platform().name
    except Exception:
        pass
    return os.environ.get("CUDASHIM_PLATFORM")


def add_section(name: str, produce: Callable[[], Any], summary: Callable[[Any], str | None] | None = None) -> None:
    """A part of the report another module fills (the simulated NPU's readiness): `produce()` gives its
    JSON value when the report is written, `summary(value)` one line for stderr after the table."""
    _sections[name] = (produce, summary)


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
    from .. import __version__

    rank, world = _files.rank()
    recorded = entries()
    # an API is in the report when the program touched it; bound-but-unused aliases are only counted
    apis = [{"api": api, **info} for api, info in recorded.items() if info["calls"]]
    counts = {t: sum(1 for a in apis if a["treatment"] == t) for t in TREATMENTS}
    return {
        "cudashim": __version__,
        "platform": _platform_name(),
        # the simulated Ascend NPU: nothing in the report is NPU behaviour
        "simulated": bool(getattr(sys.modules.get("cudashim.emulated.npu.device"), "started", lambda: False)()),
        "rank": rank,
        "world_size": world,
        "pid": os.getpid(),
        # the arguments may hold secrets (tokens, passwords): recorded only when asked for
        "argv": list(sys.argv) if _flag("CUDASHIM_REPORT_ARGS") else list(sys.argv[:1]),
        "summary": counts,
        "bound": len(recorded),
        "apis": apis,
        "patches": _patch_status(),
        # with a device profile: peaks, largest request and first misfit per device, with call sites
        "memory": getattr(sys.modules.get("cudashim.emulated.preflight"), "summary", lambda: None)(),
        **{name: produce() for name, (produce, _) in _sections.items()},
    }


def _flag(name: str) -> bool:
    from .. import envs

    try:
        return bool(envs.get(name))
    except ValueError:  # EnvError: malformed counts as set
        return True


def write(path: str | None = None, *, stderr: bool = True) -> str | None:
    """Write the JSON report (and the stderr table); returns the file written, None when disabled."""
    global _written
    target = report_path(path)
    if target is None:
        return None
    base = path if path is not None else _path
    if ".pid" in Path(target).stem and not _owner and not any(e[1] for e in _entries.values()):
        return None  # a helper process (DataLoader worker, spawn child) that touched nothing: no file
    if base is not None and target == str(Path(base)) and _files.ranks_wrote_since(base, _started):
        # the launcher of the ranks (torchrun's agent probes device_count itself): their files are the report
        return None
    data = snapshot()
    claim = base is not None and target == str(Path(base))
    target = _files.write_file(target, data, claim, _started)
    if stderr:
        print(_files.table(data, target), file=sys.stderr)
        for name, (_, summary) in _sections.items():
            line = summary(data[name]) if summary is not None else None
            if line:
                print(line, file=sys.stderr)
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
    global _enabled, _path, _written, _owner, _set_owner
    if _set_owner is not None and os.environ.get(_OWNER) == _set_owner:
        del os.environ[_OWNER]
    _set_owner = None
    _entries.clear()
    _sections.clear()
    _enabled = None
    _path = None
    _written = None
    _owner = True
