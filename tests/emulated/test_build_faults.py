"""Faults around the native core's build and cache: a build killed mid-way, two first builds at once, a
damaged cached library, a read-only cache folder, HOME empty. The build is a fake of torch's extension
build that takes torch's build lock as torch does (_fake_build.py), so these run in seconds."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "_fake_build.py"
WAIT_S = 60  # a guard against a hang, far above what each step takes


def _start(tmp: Path, tag: str, build_s: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDASHIM_DISABLE="1", CUDASHIM_BUILD_DIR=str(tmp / "cache"),
               FAKE_LOG=str(tmp / "builds.log"), FAKE_READY=str(tmp / f"{tag}.ready"), FAKE_BUILD_S=str(build_s))
    err = open(tmp / f"{tag}.err", "w")
    return subprocess.Popen([sys.executable, str(FAKE)], env=env, stdout=subprocess.PIPE, stderr=err, text=True)


def _wait_for(cond, what: str) -> None:  # noqa: ANN001
    end = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < end, f"gave up waiting: {what}"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen) -> str:
    try:
        out, _ = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the start hung") from None
    assert proc.returncode == 0, proc.returncode
    return out.strip().splitlines()[-1]


def _builds(tmp: Path) -> list[str]:
    log = tmp / "builds.log"
    return log.read_text().split() if log.exists() else []


def test_a_start_after_a_killed_build_waits_for_its_death_then_builds(tmp_path: Path) -> None:
    """A build killed with SIGKILL leaves torch's build lock behind, which made every later start wait
    forever; the next start now says whom it waits for and builds once the killed one is gone."""
    first = _start(tmp_path, "first", 600)
    _wait_for((tmp_path / "first.ready").exists, "the first build to start")
    second = _start(tmp_path, "second", 0)
    _wait_for(lambda: "waiting for process" in (tmp_path / "second.err").read_text(), "the second start to wait")
    assert f"waiting for process {first.pid}" in (tmp_path / "second.err").read_text()
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert _finish(second) == "built"
    assert _builds(tmp_path) == [str(first.pid), str(second.pid)]
    third = _start(tmp_path, "third", 0)  # the library the second built is the cache's now
    assert _finish(third).startswith("cached ")


def test_a_waiting_start_says_how_long_it_has_waited(tmp_path: Path) -> None:
    """A start waiting for another build said so once and then nothing, for as long as the build ran."""
    first = _start(tmp_path, "first", 600)
    try:
        _wait_for((tmp_path / "first.ready").exists, "the first build to start")
        second = _start(tmp_path, "second", 0)
        _wait_for(lambda: "still waiting (" in (tmp_path / "second.err").read_text(), "the second start to say how long")
        err = (tmp_path / "second.err").read_text()
        assert f"for process {first.pid} (" in err and "_fake_build.py" in err, err  # the holder and its command
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert _finish(second) == "built"
    assert "the build lock is free after" in (tmp_path / "second.err").read_text()


_LEFT_BEHIND = r"""
import fcntl, os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, str(os.getpid()).encode(), 0)
os.set_inheritable(fd, True)
child = subprocess.Popen(["sleep", "600"], pass_fds=(fd,), start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_lock_held_by_a_killed_builds_compilers_is_not_waited_for(tmp_path: Path) -> None:
    """A build killed while its compiler processes run on leaves its lock held by them (they inherited
    it) though the process the lock names is gone: a start waited, printing nothing, for as long as they
    ran. It now puts that lock aside and builds."""
    from cudashim.emulated import _build

    cache = tmp_path / "cache"
    cache.mkdir()
    lock = cache / f"{_build._NAME}-{_build._key('fake')}.lock"
    killed = subprocess.run([sys.executable, "-c", _LEFT_BEHIND, str(lock)], capture_output=True, text=True,
                            timeout=WAIT_S)
    compiler = int(killed.stdout.split()[0])  # still running, holding the lock
    try:
        builder = int(lock.read_text())
        assert builder != compiler and killed.returncode == -signal.SIGKILL
        start = _start(tmp_path, "start", 0)
        assert _finish(start) == "built"
        err = (tmp_path / "start.err").read_text()
        assert f"names process {builder}, which is gone" in err, err
        assert _builds(tmp_path) == [str(start.pid)]
    finally:
        os.kill(compiler, signal.SIGKILL)


def test_two_first_builds_at_once_build_once(tmp_path: Path) -> None:
    a, b = _start(tmp_path, "a", 1), _start(tmp_path, "b", 1)
    results = sorted([_finish(a), _finish(b)])
    assert results[0] == "built" and results[1].startswith("cached "), results
    assert len(_builds(tmp_path)) == 1


def _cached(cache: Path) -> Path:
    """Where _fake_build.py's load() finds its library in `cache`."""
    from cudashim.emulated import _build

    return cache / f"{_build._NAME}-{_build._key('fake')}.so"


def _real_library() -> Path:
    import sysconfig

    return next(Path(sysconfig.get_config_var("DESTSHARED")).glob("*.so"))


def test_a_truncated_cached_library_is_named_and_rebuilt(tmp_path: Path) -> None:
    """dlopen of a library cut to half its size died of SIGBUS, with no message."""
    lib = _cached(tmp_path / "cache")
    whole = _real_library().read_bytes()
    lib.parent.mkdir(parents=True)
    lib.write_bytes(whole[: len(whole) // 2])
    proc = _start(tmp_path, "one", 0)
    assert _finish(proc) == "built"
    err = (tmp_path / "one.err").read_text()
    assert str(lib) in err and "truncated" in err, err
    assert lib.read_bytes() == whole


class _Core(str):
    """A loaded core as the fakes report it: its text, and the keys load() initialised it for."""

    def init(self, key: str) -> None:
        self.keys = [*getattr(self, "keys", []), key]


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """This process's load() with a fake torch whose build records its folder (nothing compiled)."""
    import types

    from cudashim.emulated import _build

    built: list[str] = []

    def load(name: str, build_directory: str, **_: object) -> object:
        built.append(build_directory)
        (Path(build_directory) / f"{name}.so").write_bytes(_real_library().read_bytes())
        return _Core("built")

    torch = types.SimpleNamespace(__version__="fake", utils=types.SimpleNamespace(
        cpp_extension=types.SimpleNamespace(load=load)))
    for name, mod in (("torch", torch), ("torch.utils", torch.utils), ("torch.utils.cpp_extension", torch.utils.cpp_extension)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(_build, "_loaded", {})
    monkeypatch.setattr(_build, "_import", lambda name, path: _Core(f"cached {path}"))
    return built


def test_both_devices_cores_come_from_one_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                fake_torch: list[str]) -> None:
    """The cpu platform's device (CUDA) and the simulated NPU (PrivateUse1) were two builds of csrc/
    with the key compiled in; one library serves both now, its key chosen when it is loaded. Within one
    process the second key is served by a copy of the file (a loaded file's globals hold one key)."""
    from cudashim.emulated import _build

    monkeypatch.setenv("CUDASHIM_BUILD_DIR", str(tmp_path / "cache"))
    cuda, npu = _build.load("CUDA"), _build.load("PrivateUse1")
    assert len(fake_torch) == 1, fake_torch
    assert cuda.keys == ["CUDA"] and npu.keys == ["PrivateUse1"]
    assert npu.startswith("cached ") and Path(npu[len("cached "):]) != _cached(tmp_path / "cache")
    monkeypatch.setattr(_build, "_loaded", {})  # a later process: both keys from the cache, nothing built
    assert _build.load("PrivateUse1") == f"cached {_cached(tmp_path / 'cache')}"
    assert len(fake_torch) == 1


def test_a_damaged_library_that_cannot_be_removed_is_named_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_torch: list[str]) -> None:
    from cudashim.emulated import _build

    monkeypatch.setenv("CUDASHIM_BUILD_DIR", str(tmp_path / "cache"))
    lib = _cached(tmp_path / "cache")
    lib.parent.mkdir(parents=True)
    lib.write_bytes(_real_library().read_bytes()[:1000])

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    with pytest.raises(_build.EmulatedBuildError) as e:
        _build.load("CUDA")
    msg = str(e.value)
    assert str(lib) in msg and "truncated" in msg and "CUDASHIM_BUILD_DIR" in msg, msg
    assert fake_torch == []


def test_a_read_only_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_torch: list[str]) -> None:
    """A cached library loads from a folder this process cannot write (no lock is needed to load);
    where a build is needed, the error names the folder and CUDASHIM_BUILD_DIR."""
    from cudashim.emulated import _build

    cache = tmp_path / "cache"
    monkeypatch.setenv("CUDASHIM_BUILD_DIR", str(cache))
    real_open = os.open

    def read_only(path: object, flags: int, *args: object) -> int:
        if str(path).startswith(str(cache)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", read_only)
    cache.mkdir()
    with pytest.raises(_build.EmulatedBuildError) as e:
        _build.load("CUDA")
    msg = str(e.value)
    assert str(cache) in msg and "CUDASHIM_BUILD_DIR" in msg and "python -m cudashim.emulated" in msg, msg
    assert fake_torch == []
    lib = _cached(cache)
    lib.write_bytes(_real_library().read_bytes())
    assert _build.load("CUDA") == f"cached {lib}"


def test_home_empty_keeps_the_caches_in_the_home_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME='' made both caches /.cache (os.path.expanduser gives "" + "/.cache")."""
    import pwd

    from cudashim.emulated import _build
    from cudashim.emulated.npu import site

    home = pwd.getpwuid(os.getuid()).pw_dir
    for name in ("CUDASHIM_BUILD_DIR", "XDG_CACHE_HOME", "CUDASHIM_WHEEL_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "")
    assert _build.build_dir() == Path(home, ".cache", "cudashim", "emulated")
    assert site.wheel_cache() == Path(home, ".cache", "cudashim", "wheels")


def test_home_empty_without_a_home_folder_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd
    import types

    from cudashim.emulated import _build
    from cudashim.emulated.npu import site
    from cudashim.errors import CudashimError

    for name in ("CUDASHIM_BUILD_DIR", "XDG_CACHE_HOME", "CUDASHIM_WHEEL_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "")
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: types.SimpleNamespace(pw_dir="/"))
    with pytest.raises(_build.EmulatedBuildError, match="CUDASHIM_BUILD_DIR"):
        _build.build_dir()
    with pytest.raises(CudashimError, match="CUDASHIM_WHEEL_CACHE"):
        site.wheel_cache()
