"""Library functions that must see the *real* ``torch.cuda.is_available()`` while they run.

Once the platform's installer is in, ``torch.cuda.is_available()`` answers True on ascend and cpu: CUDA-written
programs take their device path. A few library probes ask the same question to decide something
else — which compiler target to build for, which accelerator library to load — and then they must
get the truth, or TileLang compiles every kernel for CUDA on an NPU-only host. torch_npu solves the
same problem for transformers/accelerate/peft/trl with its ``apis_config.json``; PROBES is our table
in the same shape, applied lazily (when each module is imported, through the import hook) rather than
by importing every listed library up front.

Entries are ``"module:qualname"`` (a function, or ``Class.method``) → minimum package version, per
distribution. While a listed function runs, ``torch.cuda.is_available`` is the real one; it is put
back when the function returns or raises. Like torch_npu's own wrapper this swaps a module attribute,
so another thread asking during the probe also sees the real answer (probes are short and run at
start-up).
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
from types import ModuleType
from typing import Any, Callable

from ._common import Bindings, when_imported

__all__ = ["PROBES", "Probe", "install", "uninstall", "installed", "probes_for", "when_imported"]


# distribution -> {"version": minimum version the entries were read from, "platforms": where they apply,
#                  "apis": ["module:qualname", ...]}
PROBES: dict[str, dict[str, Any]] = {
    "tilelang": {
        # read from tilelang 0.1.15: determine_target("auto") walks the registered detectors through
        # auto_detect_target(); the CUDA detector (tilelang/cuda/target.py) gates on
        # torch.cuda.is_available() once it finds a CUDA toolkit, so an NPU box with CUDA headers would
        # otherwise build every target="auto" kernel for CUDA. The detectors are registered by
        # reference, so the probe wraps the walk, not the detector.
        "version": "0.1.15",
        "platforms": ("ascend", "cpu"),
        "apis": [
            "tilelang.backend.target:auto_detect_target",
            "tilelang.cuda.target:_detect_torch_cuda_arch",
            "tilelang.carver.arch:auto_infer_current_arch",
        ],
    },
    # torch_npu's apis_config.json covers these on ascend too (when they are installed before
    # transfer_to_npu runs); listed here so a library imported later is covered as well.
    "transformers": {
        "version": "4.32.0",
        "platforms": ("ascend",),
        "apis": [
            "transformers.utils.import_utils:is_torch_cuda_available",
            "transformers.utils.import_utils:is_torch_bf16_gpu_available",
            "transformers.utils.import_utils:is_torch_tf32_available",
        ],
    },
    "accelerate": {
        "version": "0.22.0",
        "platforms": ("ascend",),
        "apis": ["accelerate.utils.imports:is_cuda_available"],
    },
}


class Probe:
    """One row of PROBES, split: the module to wait for, the attribute path inside it."""

    __slots__ = ("dist", "module", "qualname", "min_version")

    def __init__(self, dist: str, target: str, min_version: str | None) -> None:
        self.dist = dist
        self.module, _, self.qualname = target.partition(":")
        self.min_version = min_version

    def __repr__(self) -> str:
        return f"Probe({self.module}:{self.qualname})"


def probes_for(platform: str) -> list[Probe]:
    return [
        Probe(dist, target, row.get("version"))
        for dist, row in PROBES.items()
        if platform in row.get("platforms", ())
        for target in row["apis"]
    ]


_bindings = Bindings()
_applied: list[str] = []
_active = False
_real: Callable[[], bool] | None = None


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def _old(probe: Probe) -> bool:
    # a module importable without distribution metadata (vendored, a source tree) is probed anyway
    if probe.min_version is None:
        return False
    try:
        have = importlib.metadata.version(probe.dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return _version_tuple(have) < _version_tuple(probe.min_version)


def _with_real_availability(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def probed(*args: Any, **kwargs: Any) -> Any:
        cuda = sys.modules["torch"].cuda
        shown = cuda.is_available
        cuda.is_available = _real
        try:
            return fn(*args, **kwargs)
        finally:
            cuda.is_available = shown

    probed.__cudashim_probe__ = fn  # type: ignore[attr-defined]
    return probed


def _apply(probe: Probe, module: ModuleType) -> None:
    if not _active or _old(probe):
        return
    owner: Any = module
    *path, attr = probe.qualname.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return  # the library moved it: nothing to probe (the table is read from one version)
    fn = getattr(owner, attr, None)
    if fn is None or getattr(fn, "__cudashim_probe__", None) is not None:
        return
    _bindings.bind(owner, attr, _with_real_availability(fn))
    _applied.append(f"{probe.module}:{probe.qualname}")


def install(platform: str, real_is_available: Callable[[], bool]) -> None:
    """Wrap every probe of `platform` (now for loaded modules, at import for the others)."""
    global _active, _real
    _real = real_is_available
    if _active:
        return
    _active = True
    for probe in probes_for(platform):
        when_imported(probe.module, functools.partial(_apply, probe))


def uninstall() -> None:
    """Put every wrapped function back; hooks that fire later do nothing."""
    global _active, _real
    _active = False
    _bindings.restore()
    _applied.clear()
    _real = None


def installed() -> list[str]:
    """The probes in place, as "module:qualname" strings."""
    return list(_applied)


from .._state import on_reset  # noqa: E402

on_reset(uninstall)
