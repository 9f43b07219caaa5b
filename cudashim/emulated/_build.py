"""Build and load the emulated device's native core (csrc/), once per source and torch version.

The core is compiled with torch's own C++ extension tooling against the installed torch. The
result is cached under a key made of the sources' hash, the torch version, the Python ABI and the
dispatch key, in CUDASHIM_BUILD_DIR or ~/.cache/cudashim/emulated; a cached build is imported
directly (no compiler, no ninja run). scripts/install builds it once (`python -m
cudashim.emulated`), so the first `import torch` of a program does not pay for it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

from ..errors import CudashimError

__all__ = ["EmulatedBuildError", "load", "build_dir", "SOURCES"]

_CSRC = Path(__file__).resolve().parents[2] / "csrc"
SOURCES = ("devices.cpp", "allocator.cpp", "views.cpp", "generator.cpp", "guard.cpp", "kernels.cpp",
           "fallback.cpp", "direct.cpp", "amp.cpp", "sdpa.cpp", "rnn.cpp", "linalg.cpp", "collectives.cpp",
           "ddp_timer.cpp", "hooks.cpp", "graph.cpp", "npu_coverage.cpp",
           "exit.cpp", "module.cpp")
_HEADERS = ("shim.h", "call.h")
_loaded: dict[str, ModuleType] = {}


class EmulatedBuildError(CudashimError):
    """The native core of the emulated device could not be built or loaded."""


def _key(torch_version: str, dispatch_key: str) -> str:
    h = hashlib.sha256()
    for name in SOURCES + _HEADERS:
        h.update(name.encode())
        h.update((_CSRC / name).read_bytes())
    h.update(torch_version.encode())
    h.update(dispatch_key.encode())
    h.update((sysconfig.get_config_var("SOABI") or sys.version).encode())
    return h.hexdigest()[:16]


def build_dir() -> Path:
    root = os.environ.get("CUDASHIM_BUILD_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cudashim", "emulated")
    return Path(root)


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(dispatch_key: str = "CUDA", verbose: bool = False) -> ModuleType:
    """The core built for `dispatch_key`, from the cache or built now; torch must be imported."""
    if dispatch_key in _loaded:
        return _loaded[dispatch_key]
    import torch

    if not _CSRC.is_dir():
        raise EmulatedBuildError(f"the emulated device's sources are missing ({_CSRC}); reinstall cudashim "
                                 "from its repository (`bash scripts/install`)")
    name = f"cudashim_{dispatch_key.lower()}"
    # one build folder per sources' hash (torch version and key included): two checkouts or two
    # versions of the sources building at once never link each other's objects into a library
    # cached under the wrong hash
    key = _key(torch.__version__, dispatch_key)
    so = build_dir() / f"{name}-{key}.so"
    if not so.exists():
        where = build_dir() / f"build-{name}-{key}"
        mod = _compile(name, where, dispatch_key, verbose)  # built and loaded: never load it twice
        tmp = so.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(where / f"{name}.so", tmp)
        os.replace(tmp, so)  # atomic: a concurrent process sees the old state or the whole library
        _loaded[dispatch_key] = mod
        return mod
    try:
        mod = _import(name, so)
    except Exception as e:  # a broken cache entry or a torch ABI mismatch
        raise EmulatedBuildError(f"the emulated device's native core ({so}) does not load: {e}; delete "
                                 f"{so} and run `python -m cudashim.emulated`") from e
    _loaded[dispatch_key] = mod
    return mod


def _compile(name: str, where: Path, dispatch_key: str, verbose: bool) -> ModuleType:
    from torch.utils import cpp_extension

    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmulatedBuildError(f"cannot create the emulated device's build folder {where}: {e}; set "
                                 "CUDASHIM_BUILD_DIR to a writable folder and run `python -m cudashim.emulated`") from e
    _drop_stale_lock(where / "lock")
    flags = ["-O2", "-fvisibility=hidden", "-Wno-unused-parameter"]
    if dispatch_key != "CUDA":
        flags.append(f"-DCUDASHIM_KEY={dispatch_key}")
    try:
        return cpp_extension.load(name=name, sources=[str(_CSRC / s) for s in SOURCES], extra_cflags=flags,
                           build_directory=str(where), verbose=verbose, is_python_module=True,
                           with_cuda=False)
    except Exception as e:
        raise EmulatedBuildError(
            f"building the emulated device's native core failed: {_errors(str(e))}. It needs a C++17 compiler (g++) and "
            "ninja; install them and run `python -m cudashim.emulated`, or choose another platform "
            "(CUDASHIM_PLATFORM)") from e


# A build takes minutes; torch's build lock (a file, no owner recorded) left by a killed build would make
# every later load wait forever. A lock older than this is taken as left behind.
_STALE_LOCK_S = 30 * 60


def _drop_stale_lock(lock: Path) -> None:
    import time

    try:
        if time.time() - lock.stat().st_mtime > _STALE_LOCK_S:
            lock.unlink()
    except FileNotFoundError:
        pass


def _errors(log: str) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln.lower() and not ln.startswith("[")]
    return "\n".join(lines[:10]) or log[-2000:]

