"""Memory preflight: will the program fit the profiled GPU, and where does it peak.

While a device profile is active the core tells start()'s observer of each allocation that raises a
device's allocated or reserved peak, of each new largest request, and of a request past the
profile's memory (before raising CUDA's OutOfMemoryError). Each is kept with its call site in user
code: the innermost frame that is neither torch's, the shim's, Inductor's generated code nor an
installed library's. At exit one line per device goes to stderr:

    cudashim preflight (h100-80gb, cuda:0, 79.11 GiB): peak allocated 61.20 GiB at train.py:88;
    peak reserved 63.00 GiB at train.py:88; largest allocation 8.00 GiB at model.py:41; fits

and summary() gives the same to the migration report (its "memory" section). The numbers are the
statistics of the model of CUDA's caching allocator (csrc/runtime/cache_model.cpp), so they are what
torch.cuda.max_memory_allocated() / max_memory_reserved() would report on the GPU.
"""

from __future__ import annotations

import atexit
import sys
from typing import Any

from .._frames import LIBRARY_DIRS, framework_dirs

__all__ = ["start", "stop", "summary", "lines", "format_size"]

_ALLOCATED, _LARGEST, _OOM, _RESERVED = 0, 1, 2, 3
_GENERATED = "torchinductor_"  # Inductor's generated modules (its cache folder): the program's caller is the site
_state: dict[str, Any] = {}


def format_size(n: int) -> str:
    """Bytes as CUDA's allocator messages print them (c10's format_size)."""
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1048576:
        return f"{n / 1024:.2f} KiB"
    if n <= 1073741824:
        return f"{n / 1048576:.2f} MiB"
    return f"{n / 1073741824:.2f} GiB"


def _call_site() -> str | None:
    """file:line (function) of the innermost user frame; an installed library's when no user frame is above."""
    skip = _state.get("skip") or framework_dirs()
    frame = sys._getframe(1)
    library = None
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(skip) and not name.startswith("<frozen") and _GENERATED not in name:
            where = f"{name}:{frame.f_lineno} ({frame.f_code.co_name})"
            if not any(d in name for d in LIBRARY_DIRS):
                return where
            library = library or where
        frame = frame.f_back
    return library


def _observe(device: int, event: int, nbytes: int) -> None:
    per = _state["devices"].setdefault(device, {})
    key = {_ALLOCATED: "peak_allocated", _RESERVED: "peak_reserved", _LARGEST: "largest_allocation",
           _OOM: "first_not_fitting"}[event]
    if event == _OOM and key in per:
        return  # the first one is the one that matters
    per[key] = {"bytes": int(nbytes), "site": _call_site()}


def start(core: Any, profile: Any, device_type: str = "cuda") -> None:
    """Observe the core's devices for `profile` (emulated/profiles/); print the preflight at exit."""
    _state.update(core=core, profile=profile, device_type=device_type, devices={}, skip=framework_dirs())
    core.set_memory_observer(_observe)
    if not _state.get("atexit"):
        atexit.register(_at_exit)  # registered after the core's, so it runs before the core quiesces
        _state["atexit"] = True


def stop() -> None:
    """No more observing (the figures so far are kept)."""
    core = _state.get("core")
    if core is not None:
        core.set_memory_observer(None)


def summary() -> dict[str, Any] | None:
    """The preflight per device, for the migration report; None when no profile is active."""
    if "profile" not in _state:
        return None
    prof = _state["profile"]
    out: dict[str, Any] = {"profile": prof.key, "name": prof.name, "total_memory": prof.total_memory, "devices": {}}
    for device, per in sorted(_state["devices"].items()):
        out["devices"][f"{_state['device_type']}:{device}"] = {**per, "fits": "first_not_fitting" not in per}
    return out


def lines() -> list[str]:
    """The preflight's stderr lines, one per device that allocated."""
    s = summary()
    if s is None:
        return []
    out = []
    for device, per in s["devices"].items():
        parts = []
        for key, label in (("peak_allocated", "peak allocated"), ("peak_reserved", "peak reserved"),
                           ("largest_allocation", "largest allocation")):
            if key in per:
                parts.append(f"{label} {format_size(per[key]['bytes'])} at {per[key]['site']}")
        if per["fits"]:
            parts.append("fits")
        else:
            miss = per["first_not_fitting"]
            parts.append(f"DOES NOT FIT: first allocation past the device's memory {format_size(miss['bytes'])} "
                         f"at {miss['site']}")
        out.append(f"cudashim preflight ({s['profile']}, {device}, {format_size(s['total_memory'])}): " + "; ".join(parts))
    return out


def _at_exit() -> None:
    stop()
    for line in lines():
        sys.stderr.write(line + "\n")
