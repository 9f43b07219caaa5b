"""Build and load the emulated device's native core (csrc/), once per source and torch version.

The core is compiled with torch's own C++ extension tooling against the installed torch. The
result is cached under a key made of the sources' hash, the torch version and the Python ABI, in
CUDASHIM_BUILD_DIR or ~/.cache/cudashim/emulated; a cached build is imported directly (no compiler,
no ninja run). scripts/install builds it once (`python -m cudashim.emulated`), so the first
`import torch` of a program does not pay for it.

One library serves both devices: load(key) imports it and calls its init(key) (CUDA: the cpu
platform's device; PrivateUse1: the simulated NPU) before anything registers with torch. A loaded
file's globals hold one key, so a process that asks for the second key loads a copy of the file
(a different file: the dynamic loader would hand back the one already loaded) under a module name
of its own (pybind11 hands back the module already made for a name).

Faults: a build holds the kernel's file lock (flock) on <library>.lock in the cache folder; the kernel
drops it when the holder exits however it exits, so a process that waits (saying whom it waits for,
then how long it has waited, on stderr) goes on within moments of a killed build's end and builds
itself. A lock still held once the process it names is gone (inherited by the compiler processes a
killed build left running) is put aside, not waited for. A cached library is checked (_elf)
before it is loaded: a damaged one (truncated by a full disk or a killed copy) is rebuilt, or named
with the fix where it cannot be replaced, instead of crashing the process inside dlopen.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Iterator

from ..errors import CudashimError
from ._elf import damage

__all__ = ["EmulatedBuildError", "load", "build_dir", "SOURCES", "KEYS"]

def _sources_folder() -> Path:
    """csrc/: shipped inside the package as _csrc/ (a wheel, `pip install .`), or beside it in a checkout."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "_csrc"
    return shipped if shipped.is_dir() else package.parent / "csrc"


_CSRC = _sources_folder()
# The two sources that take longest (module.cpp includes pybind11's headers; amp.cpp instantiates a kernel
# for each operator of torch's autocast lists) come first: started first, the others fill the cores after.
_FIRST = ("module.cpp", "ops/amp.cpp")
_SOURCE_SUFFIXES = (".cpp",)
_HEADER_SUFFIXES = (".h",)


def native_files(csrc: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(sources, headers) under `csrc`, relative, read from the folder: every .cpp is compiled and every
    .h is in the cache key, so a file added to csrc/ cannot be left out of either. Other files are not
    part of the build (tests/layout checks that there are none)."""
    if not csrc.is_dir():
        return (), ()
    files = sorted(p.relative_to(csrc).as_posix() for p in csrc.rglob("*") if p.is_file())
    cpp = [f for f in files if f.endswith(_SOURCE_SUFFIXES)]
    sources = tuple([f for f in _FIRST if f in cpp] + [f for f in cpp if f not in _FIRST])
    return sources, tuple(f for f in files if f.endswith(_HEADER_SUFFIXES))


SOURCES, _HEADERS = native_files(_CSRC)
KEYS = ("CUDA", "PrivateUse1")  # what the core's init accepts
_NAME = "cudashim_core"  # the extension's module name, compiled in (its PyInit_ symbol)
_loaded: dict[str, ModuleType] = {}


class EmulatedBuildError(CudashimError):
    """The native core of the emulated device could not be built or loaded."""


def _key(torch_version: str) -> str:
    h = hashlib.sha256()
    sources, headers = native_files(_CSRC)
    for name in sources + headers:
        h.update(name.encode())
        h.update((_CSRC / name).read_bytes())
    h.update(torch_version.encode())
    h.update((sysconfig.get_config_var("SOABI") or sys.version).encode())
    return h.hexdigest()[:16]


def build_dir() -> Path:
    explicit = os.environ.get("CUDASHIM_BUILD_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec: a relative value is invalid and ignored
        return Path(xdg, "cudashim", "emulated")
    from .. import envs

    try:
        home = envs.home_folder("the emulated device's native core", "CUDASHIM_BUILD_DIR")
    except CudashimError as e:
        raise EmulatedBuildError(str(e)) from None
    return Path(home, ".cache", "cudashim", "emulated")


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(dispatch_key: str = "CUDA", verbose: bool = False) -> ModuleType:
    """The core serving `dispatch_key` (one of KEYS), from the cache or built now; torch must be imported."""
    if dispatch_key in _loaded:
        return _loaded[dispatch_key]
    if dispatch_key not in KEYS:
        raise EmulatedBuildError(f"the emulated device's core serves the dispatch key {' or '.join(KEYS)}, "
                                 f"not {dispatch_key!r}")
    import torch

    if not _CSRC.is_dir():
        raise EmulatedBuildError(f"the emulated device's sources are missing ({_CSRC}); reinstall cudashim "
                                 "from its repository (`bash scripts/install`)")
    # one build folder per sources' hash (torch version included): two checkouts or two versions of
    # the sources building at once never link each other's objects into a library cached under the
    # wrong hash
    key = _key(torch.__version__)
    root = build_dir()
    so = root / f"{_NAME}-{key}.so"
    built = _cache(so, root / f"build-{_NAME}-{key}", root / f"{_NAME}-{key}.lock", verbose)
    if built is not None:  # built and loaded from its build folder: a file this process has not loaded
        mod = built
    elif not _loaded:
        mod = _load_cached(so, dispatch_key)
    else:  # the cached file serves the other key in this process already
        mod = _load_cached(_copy(so, f"{_NAME}-{key}.{dispatch_key.lower()}.so"), dispatch_key)
    mod.init(dispatch_key)
    _loaded[dispatch_key] = mod
    return mod


def _cache(so: Path, where: Path, lock: Path, verbose: bool) -> ModuleType | None:
    """`so` cached and whole afterwards; the module when this call built it (torch loads what it builds)."""
    if so.exists() and damage(so) is None:
        return None
    with _build_lock(lock, where):
        if so.exists() and damage(so) is None:  # built by the process this one waited for
            return None
        _discard_damaged(so)
        mod = _compile(where, verbose)
        built = where / f"{_NAME}.so"
        why = damage(built)
        if why is not None:
            raise EmulatedBuildError(f"the emulated device's native core was built damaged ({built}: {why}); "
                                     f"delete {where} and run `python -m cudashim.emulated`")
        _place(built, so)
    return mod


def _place(src: Path, dst: Path) -> None:
    tmp = dst.with_suffix(f".{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)  # atomic: a concurrent process sees the old state or the whole library


def _copy(so: Path, name: str) -> Path:
    """A copy of the cached library, for a second key in one process (made once, beside it)."""
    copy = so.with_name(name)
    if copy.exists() and damage(copy) is None:
        return copy
    _discard_damaged(copy)
    try:
        _place(so, copy)
    except OSError as e:
        raise EmulatedBuildError(f"cannot copy the emulated device's native core to {copy}: {e.strerror}; set "
                                 "CUDASHIM_BUILD_DIR to a writable folder") from None
    return copy


def _load_cached(so: Path, dispatch_key: str) -> ModuleType:
    try:  # the last part of the name finds the module's init function (PyInit_cudashim_core)
        return _import(f"{_NAME}_{dispatch_key.lower()}.{_NAME}", so)
    except Exception as e:  # a torch ABI mismatch, a library of another machine
        raise EmulatedBuildError(f"the emulated device's native core ({so}) does not load: {e}; delete "
                                 f"{so} and run `python -m cudashim.emulated`") from e


def _discard_damaged(so: Path) -> None:
    """A damaged cached library goes (rebuilt next), said on stderr; where it cannot, the error names it."""
    why = damage(so) if so.exists() else None
    if why is None:
        return
    try:
        so.unlink()
    except OSError as e:
        raise EmulatedBuildError(f"the cached native core of the emulated device {so} is damaged ({why}) and cannot "
                                 f"be removed ({e.strerror}); delete it, or set CUDASHIM_BUILD_DIR to a writable "
                                 "folder, and run `python -m cudashim.emulated`") from None
    sys.stderr.write(f"cudashim: the cached native core {so} was damaged ({why}); rebuilding it\n")


# while waiting for another build: said at once, again after the first of these seconds, then every
# the second (a build takes minutes; a waiting start must never look hung)
_REPORT_S = (5.0, 30.0)
_POLL_S = 0.2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
    except OSError:
        return ""
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return f" ({text[:120]}{'...' if len(text) > 120 else ''})" if text else ""


def _holder(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def _build_lock(path: Path, where: Path) -> Iterator[None]:
    """Hold the build of one library: the kernel's exclusive file lock on `path`, released when this
    process exits however it exits. The holder's pid is written in the file for the waiting message.

    A start that finds the lock taken says whom it waits for, then how long it has waited, until the
    lock is free. The lock file is also held by whatever inherited its descriptor from the builder
    (compiler processes left running when it was killed): once the process named in the file is gone,
    the lock is put aside (those processes keep the old file) and this start takes a fresh one."""
    import fcntl
    import time

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmulatedBuildError(f"cannot build the emulated device's native core in {path.parent}: {e.strerror} "
                                 f"({path}); set CUDASHIM_BUILD_DIR to a writable folder and run "
                                 "`python -m cudashim.emulated`") from None
    start = time.monotonic()
    reports = 0
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the compiler's processes
        except OSError as e:
            raise EmulatedBuildError(f"cannot build the emulated device's native core in {path.parent}: "
                                     f"{e.strerror} ({path}); set CUDASHIM_BUILD_DIR to a writable folder and "
                                     "run `python -m cudashim.emulated`") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if holder is not None and holder != os.getpid() and not _alive(holder):
                _put_aside(path, fd, holder)
                os.close(fd)
                continue
            waited = time.monotonic() - start
            due = 0.0 if reports == 0 else _REPORT_S[0] if reports == 1 else _REPORT_S[0] + _REPORT_S[1] * (reports - 1)
            if waited >= due:
                who = f"process {holder}{_command(holder)}" if holder is not None else "another process"
                head = "waiting" if reports == 0 else f"still waiting ({waited:.0f} s so far)"
                sys.stderr.write(f"cudashim: {head} for {who}, which is building the emulated device's native "
                                 f"core in {where}; it goes on when that build ends (the lock: {path})\n")
                sys.stderr.flush()
                reports += 1
            os.close(fd)
            time.sleep(_POLL_S)
            continue
        try:
            if os.fstat(fd).st_ino != os.stat(path).st_ino:  # put aside meanwhile: take the file there now
                os.close(fd)
                continue
        except FileNotFoundError:
            os.close(fd)
            continue
        break
    try:
        if reports:
            sys.stderr.write(f"cudashim: the build lock is free after {time.monotonic() - start:.0f} s\n")
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def _put_aside(path: Path, fd: int, holder: int) -> None:
    """The lock names a process that is gone, yet it is held: by processes that inherited it (a killed
    build's compilers). Its file is renamed away, when it is still the one at `path`, said on stderr."""
    try:
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            return  # another start put it aside first
        os.replace(path, path.with_name(f"{path.name}.stale-{holder}"))
    except FileNotFoundError:
        return
    sys.stderr.write(f"cudashim: the build lock {path} names process {holder}, which is gone, and is still held "
                     "by processes it left behind (its compiler's, still running); not waiting for them: this "
                     "start takes a fresh lock\n")
    sys.stderr.flush()


def _compile(where: Path, verbose: bool) -> ModuleType:
    from torch.utils import cpp_extension

    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmulatedBuildError(f"cannot create the emulated device's build folder {where}: {e}; set "
                                 "CUDASHIM_BUILD_DIR to a writable folder and run `python -m cudashim.emulated`") from e
    _set_aside_interrupted(where)
    try:
        flags = FLAGS + _precompiled_header(where)
        return cpp_extension.load(name=_NAME, sources=[str(_CSRC / s) for s in native_files(_CSRC)[0]], extra_cflags=flags,
                           extra_include_paths=[str(_CSRC)], build_directory=str(where), verbose=verbose,
                           is_python_module=True, with_cuda=False)
    except Exception as e:
        raise EmulatedBuildError(
            f"building the emulated device's native core failed: {_errors(str(e))}. It needs a C++20 compiler "
            "(g++ or clang++ accepting -std=c++20) and ninja (a dependency of the package: `pip install ninja`); "
            "install them and run `python -m cudashim.emulated`, or choose another platform (CUDASHIM_PLATFORM)") from e
    finally:
        (where / f"{_PCH}.gch").unlink(missing_ok=True)  # hundreds of MB, of no use once the objects exist


FLAGS = ["-O2", "-fvisibility=hidden", "-Wno-unused-parameter"]
_PCH = "precompiled.h"
_MADE_WITH = "made with: "


def compile_flags() -> list[str]:
    """The flags torch's extension build (cpp_extension.load, no CUDA) gives each of the core's sources, in
    its order: a precompiled header is used only where it was made with the same ones."""
    from torch.utils import cpp_extension

    includes = cpp_extension.include_paths("cpu") + [sysconfig.get_path("include", scheme="posix_prefix")]
    return ([f"-DTORCH_EXTENSION_NAME={_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H", f"-I{_CSRC}"]
            + [f for i in includes for f in ("-isystem", i)] + ["-fPIC", "-std=c++20"] + FLAGS)


def _precompiled_header(where: Path) -> list[str]:
    """shim.h (ATen's headers) compiled once, for every source to include first: parsing those headers is
    most of each source's compile time. The flags that make every source include it; none where g++
    cannot make it (another compiler): the sources then parse the headers themselves, as they would
    anyway if the header did not match their flags (g++ ignores a precompiled header made otherwise)."""
    import shlex
    import subprocess

    from torch.utils import cpp_extension

    header = where / _PCH
    try:
        flags = compile_flags()
        # the flags it is made with, kept in it: the build's record to check the sources' flags against
        header.write_text(f"// {_MADE_WITH}{shlex.join(flags)}\n#include \"shim.h\"\n")
        cmd = [cpp_extension.get_cxx_compiler(), *flags, "-x", "c++-header", str(header), "-o", f"{header}.gch"]
        made = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except (AttributeError, OSError):  # a torch without these helpers, no compiler: the build says what is wrong
        made = False
    return ["-include", str(header)] if made else []


def _set_aside_interrupted(where: Path) -> None:
    """Called holding the build lock. torch's own build lock (a file in the folder, no owner recorded)
    is then the mark of a build that was killed: it would make torch wait forever, and that build's
    compiler processes may still be writing there. The folder is renamed away (they keep writing into
    it) and removed; the build starts afresh."""
    if not (where / "lock").exists():
        return
    aside = where.with_name(f"{where.name}.interrupted-{os.getpid()}")
    try:
        os.replace(where, aside)
    except OSError:
        (where / "lock").unlink(missing_ok=True)
        return
    shutil.rmtree(aside, ignore_errors=True)
    where.mkdir(parents=True, exist_ok=True)


def _errors(log: str) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln.lower() and not ln.startswith("[")]
    return "\n".join(lines[:10]) or log[-2000:]

