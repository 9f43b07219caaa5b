"""Assemble the simulated torch_npu: the wheel's whole Python package over our simulated native layer.

Every file of the `torch_npu` package of the torch-npu wheel built for the installed torch's release
(scripts/install fetches the wheel with `pip download --no-deps`) is written, unchanged, into a folder
under the cache, except its native libraries (the .so files, lib/; its C++ headers are kept): in their place stands
simsite/torch_npu/_C, the project's torch_npu._C over the simulated device's core. The folder is keyed
by the wheel's and the stand-ins' contents; prepare() puts it first on sys.path so `import torch_npu`
finds it. The wheel's code is never part of this repository.
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

__all__ = ["WHEEL_SPEC", "wheel_cache", "find_wheel", "fetch_wheel", "prepare", "package_modules", "wheel_members", "alone_env",
           "SimulatorWheelMissing"]

# the torch-npu release built for the installed torch (cudashim/_torch_compat.py decides)
WHEEL_SPEC = f"torch-npu=={torch_npu_release()}"
_GLOB = f"torch_npu-{torch_npu_release()}-*.whl"
_STANDINS = Path(__file__).resolve().parent / "simsite"

#: the wheel's native libraries (replaced by simsite/torch_npu/_C); its C++ headers (torch_npu/include) are
#: taken, as the wheel installs them: torch_npu's tests and cpp extensions read them
_NATIVE_DIRS = ("torch_npu/lib/",)
#: the folder of the assembled site that holds the wheel's .dist-info
_DIST = "dist"


def wheel_members(names: list[str]) -> list[str]:
    """The wheel's files the simulated torch_npu takes: its torch_npu package less its native libraries
    (its headers kept), and torchnpugen (the code generator torch_npu/_inductor imports)."""
    return [n for n in names if n.startswith(("torch_npu/", "torchnpugen/")) and not n.endswith("/") and ".so" not in n.rsplit("/", 1)[-1]
            and not n.startswith(_NATIVE_DIRS)]


def package_modules(wheel: Path | None = None) -> list[str]:
    """Every module of the wheel's torch_npu package (dotted names, packages included), sorted."""
    with zipfile.ZipFile(wheel or find_wheel()) as zf:
        names = zf.namelist()
    out = set()
    for n in wheel_members(names):
        if n.endswith(".py") and n.startswith("torch_npu/"):
            mod = n[:-3].replace("/", ".")
            out.add(mod[: -len(".__init__")] if mod.endswith(".__init__") else mod)
    return sorted(out)


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
    h.update(Path(__file__).read_bytes())  # how the folder is assembled
    for p in _standin_files():
        h.update(str(p.relative_to(_STANDINS)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _assemble(wheel: Path, dest: Path) -> None:
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(wheel) as zf:
            for member in wheel_members(zf.namelist()):
                (tmp / member).parent.mkdir(parents=True, exist_ok=True)
                (tmp / member).write_bytes(zf.read(member))
            # the wheel's metadata, apart (alone_env puts it on the path): its torch.backends entry point is
            # how `import torch` loads torch_npu on a host where the wheel is installed
            for member in zf.namelist():
                if member.split("/", 1)[0].endswith(".dist-info") and not member.endswith(("/", "RECORD")):
                    (tmp / _DIST / member).parent.mkdir(parents=True, exist_ok=True)
                    (tmp / _DIST / member).write_bytes(zf.read(member))
        shutil.copytree(_STANDINS, tmp, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        # torch_npu loads its ATB operators from this library and, where the load fails (no NNAL on
        # the host), raises that failure when an ATB operator is called: a file that is no library
        # gives the simulated NPU the same course
        (tmp / "torch_npu" / "lib").mkdir(exist_ok=True)
        (tmp / "torch_npu" / "lib" / "libop_plugin_atb.so").write_text(
            "not a library: the simulated NPU has no ATB (NNAL) kernels\n")
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


def assembled() -> Path:
    """The assembled site folder (assembled on first use); this process's sys.path untouched."""
    wheel = find_wheel()
    dest = wheel_cache().parent / "npusim" / _key(wheel)
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        _assemble(wheel, dest)
    return dest


def prepare() -> Path:
    """The assembled site folder, first on sys.path (idempotent)."""
    dest = assembled()
    if str(dest) not in sys.path:
        sys.path.insert(0, str(dest))
    return dest


def alone_env(root: Path, environ: "dict[str, str] | None" = None) -> dict[str, str]:
    """The environment that runs the simulated torch_npu alone (no shim: `import torch_npu` is the
    wheel's package over the simulated _C, as on a host with an NPU): the assembled site and the
    checkout `root` on PYTHONPATH, and the wheel's metadata, so that `import torch` loads torch_npu through
    its entry point as where the wheel is installed; the shim's bootstrap off."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if not k.startswith(("CUDASHIM_", "ASCEND_RT_"))}
    for keep in ("CUDASHIM_BUILD_DIR", "CUDASHIM_WHEEL_CACHE", "CUDASHIM_NPU_DEVICES", "CUDASHIM_CANN_VERSION"):
        if environ is None and keep in os.environ:
            env[keep] = os.environ[keep]
    site = assembled()
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(root), str(site / _DIST)])
    env["CUDASHIM_DISABLE"] = "1"
    return env
