"""`python _fake_build.py`: cudashim.emulated._build.load("CUDA") with a tiny fake of torch's extension
build, so the build's locking and cache checks run in seconds (test_build_faults.py).

The fake behaves as torch.utils.cpp_extension.load does around a build: it takes torch's own build
lock (the file `lock` in the build folder, created exclusively; a process finding it waits until it
is gone, forever if its owner was killed), "compiles" for FAKE_BUILD_S seconds (a line appended to
FAKE_LOG first; FAKE_READY created once under way), writes a real ELF library (one of Python's own)
as the result, and drops the lock. Loading a library is faked too (no dlopen): prints "built" or
"cached <path>" as the last line. The cudashim package comes from the repository on sys.path.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import time
import types
from pathlib import Path

REAL_LIBRARY = next(Path(sysconfig.get_config_var("DESTSHARED")).glob("*.so"))


class Core(str):
    """A loaded core as this fake reports it: its text, and the init(key) that load() calls."""

    def init(self, key: str) -> None:
        pass


def fake_load(name: str, build_directory: str, **_: object) -> object:
    where = Path(build_directory)
    baton = where / "lock"
    try:
        os.close(os.open(baton, os.O_CREAT | os.O_EXCL))
    except FileExistsError:  # torch: FileBaton.wait(), then it takes the build as done
        while baton.exists():
            time.sleep(0.1)
        return Core("built")
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(f"{os.getpid()}\n")
    if os.environ.get("FAKE_READY"):
        Path(os.environ["FAKE_READY"]).touch()
    time.sleep(float(os.environ.get("FAKE_BUILD_S", "0")))
    shutil.copyfile(REAL_LIBRARY, where / f"{name}.so")
    baton.unlink()
    return Core("built")


torch = types.ModuleType("torch")
torch.__version__ = "fake"  # type: ignore[attr-defined]
torch.utils = types.ModuleType("torch.utils")  # type: ignore[attr-defined]
torch.utils.cpp_extension = types.ModuleType("torch.utils.cpp_extension")  # type: ignore[attr-defined]
torch.utils.cpp_extension.load = fake_load  # type: ignore[attr-defined]
sys.modules.update({"torch": torch, "torch.utils": torch.utils, "torch.utils.cpp_extension": torch.utils.cpp_extension})

from cudashim.emulated import _build  # noqa: E402

_build._import = lambda name, path: Core(f"cached {path}")  # type: ignore[assignment]
print(_build.load("CUDA"), flush=True)
