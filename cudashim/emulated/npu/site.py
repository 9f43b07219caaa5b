"""Assemble the simulated torch_npu: our stand-ins (simsite/) plus the wheel's own Python files.

REAL_FILES are read from the torch-npu wheel built for the installed torch's release, in the wheel
cache (scripts/install fetches it with `pip download --no-deps`), and written, unchanged, beside the
stand-ins into a folder under the cache, keyed by the stand-ins' and the wheel's contents. prepare()
puts that folder first on sys.path so `import torch_npu` finds it. The wheel's code is never part of this repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from ..._torch_compat import torch_npu_release
from ...errors import CudashimError

__all__ = ["WHEEL_SPEC", "REAL_FILES", "wheel_cache", "find_wheel", "fetch_wheel", "prepare", "SimulatorWheelMissing"]

# the torch-npu release built for the installed torch (cudashim/_torch_compat.py decides)
WHEEL_SPEC = f"torch-npu=={torch_npu_release()}"
_GLOB = f"torch_npu-{torch_npu_release()}-*.whl"
_STANDINS = Path(__file__).resolve().parent / "simsite"

#: the wheel's files that run as they are on the simulated NPU (docs: README "Testing an Ascend port")
REAL_FILES = (
    "torch_npu/contrib/transfer_to_npu.py",
    "torch_npu/contrib/apis_config.json",
    "torch_npu/_init/patches/monkey_patches.py",
    "torch_npu/_init/patches/patch_manager.py",
    "torch_npu/_init/common/warning_utils.py",
    "torch_npu/utils/_error_code.py",
    "torch_npu/utils/utils.py",
    "torch_npu/npu/graphs.py",
    "torch_npu/npu/_npugraph_handlers/npugraph_handler.py",
    "torch_npu/npu/_npugraph_handlers/ifa_handler.py",
    "torch_npu/npu/_npugraph_handlers/simple_handler.py",
    "torch_npu/_compiler/_config.py",
)


class SimulatorWheelMissing(CudashimError):
    """The torch-npu wheel the simulated torch_npu is assembled from is not in the cache."""


def wheel_cache() -> Path:
    from ... import envs

    explicit = envs.get("CUDASHIM_WHEEL_CACHE")
    if explicit:
        return Path(explicit)  # type: ignore[arg-type]
    return Path(envs.home_folder("the torch-npu wheel cache", "CUDASHIM_WHEEL_CACHE"), ".cache", "cudashim", "wheels")


def find_wheel() -> Path:
    found = sorted(wheel_cache().glob(_GLOB)) if wheel_cache().is_dir() else []
    if not found:
        raise SimulatorWheelMissing(
            f"the simulated Ascend NPU needs the {WHEEL_SPEC} wheel's Python files and {wheel_cache()} has none; "
            f"run `bash scripts/install` (it fetches the wheel), or `pip download --no-deps {WHEEL_SPEC} "
            f"-d {wheel_cache()}` (set CUDASHIM_WHEEL_CACHE to use another folder)")
    return found[0]


def fetch_wheel() -> tuple[Path | None, str]:
    """(the cached wheel, "") or (None, why pip could not download it). Only the wheel, no dependency."""
    cache = wheel_cache()
    found = sorted(cache.glob(_GLOB)) if cache.is_dir() else []
    if found:
        return found[0], ""
    cache.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
            WHEEL_SPEC, "-d", str(cache)]
    # the Python files are the same in every build of the wheel; the pinned form works from any host
    pinned = base + ["--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
                     "--implementation", "cp"]
    errors = []
    for cmd in (base, pinned):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(str(exc))
            continue
        found = sorted(cache.glob(_GLOB))
        if found:
            return found[0], ""
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        errors.append(tail[-1] if tail else f"exit {proc.returncode}")
    return None, f"pip download {WHEEL_SPEC} failed: {'; '.join(errors)}"


def _standin_files() -> list[Path]:
    return sorted(p for p in _STANDINS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _key(wheel: Path) -> str:
    h = hashlib.sha256(wheel.name.encode())
    h.update(str(wheel.stat().st_size).encode())
    for p in _standin_files():
        h.update(str(p.relative_to(_STANDINS)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _assemble(wheel: Path, dest: Path) -> None:
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(_STANDINS, tmp, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        with zipfile.ZipFile(wheel) as zf:
            for member in REAL_FILES:
                (tmp / member).parent.mkdir(parents=True, exist_ok=True)
                (tmp / member).write_bytes(zf.read(member))
    except (KeyError, zipfile.BadZipFile) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SimulatorWheelMissing(f"{wheel} is not a usable {WHEEL_SPEC} wheel ({exc}); delete it and run "
                                    "`bash scripts/install`") from exc
    try:
        os.replace(tmp, dest)  # atomic: a concurrent process sees no folder or the whole one
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race
        if not dest.is_dir():
            raise


def prepare() -> Path:
    """The assembled site folder, first on sys.path (idempotent)."""
    wheel = find_wheel()
    dest = wheel_cache().parent / "npusim" / _key(wheel)
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        _assemble(wheel, dest)
    if str(dest) not in sys.path:
        sys.path.insert(0, str(dest))
    return dest
