"""The simulated NPU's device: the emulated-device core (csrc/) serving PrivateUse1, named `npu`.

What torch_npu's native start-up does on a real host, done over the core: PrivateUse1 renamed to
`npu`, the Tensor/Module/Storage methods generated (`.npu()`, `.is_npu`), and the device count —
CUDASHIM_NPU_DEVICES, else the simulated host's davinci nodes — narrowed by ASCEND_RT_VISIBLE_DEVICES
as the CANN runtime narrows it (the listed physical ids, in their order, become npu:0..n-1).
start() runs after `import torch`, from the simulated torch_npu's __init__ (simsite/), never earlier.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ...errors import CudashimError

__all__ = ["cann_version", "DEFAULT_CANN_VERSION", "install_cann_home", "start", "started", "core", "profile", "visible_count", "physical_ids", "DEVICE_TYPE"]

DEVICE_TYPE = "npu"

#: the CANN version the simulated NPU reports unless CUDASHIM_CANN_VERSION names another
DEFAULT_CANN_VERSION = "8.5.0"

#: CANN module names GetCANNVersion knows (packageNameMap and pkgNameV2Map, GetCANNInfo.cpp); others answer ""
_CANN_MODULES = {"CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "DRIVER"}
_CANN_MODULES_V2 = {
    "acl_extend", "aoe", "asc-devkit", "ascendnpu-ir", "asc-tools", "bisheng-compiler", "dflow-executor", "dvpp",
    "ge-compiler", "ge-executor", "graph_autofusion", "hccl", "hcomm", "hixl", "metadef", "ncs", "oam_tools", "opbase",
    "ops_cv", "ops_legacy", "ops_math", "ops_nn", "ops_transformer", "pto_isa", "pyACL", "runtime", "tbe-tik", "test-ops"}


def cann_version(module: str = "CANN") -> str:
    """What GetCANNVersion(module) answers on the simulated NPU: the configured CANN version for every
    module it knows, "" for a module it does not know."""
    if module not in _CANN_MODULES and module not in _CANN_MODULES_V2:
        return ""
    version = os.environ.get("CUDASHIM_CANN_VERSION", "").strip() or DEFAULT_CANN_VERSION
    if module == "DRIVER":
        return os.environ.get("CUDASHIM_NPU_DRIVER_VERSION", "").strip() or "25.5.0"
    return version

def install_cann_home(site: "os.PathLike[str] | str") -> None:
    """The simulated CANN installation, set up as CANN's set_env.sh sets up a real one before torch_npu
    is imported: ASCEND_HOME_PATH and ASCEND_OPP_PATH name folders that exist (the runtime, compiler and
    opp folders torch_npu's start-up checks for) and its version file (ascend_toolkit_install.info, which
    torch_npu.utils.collect_env.get_cann_version reads) gives the simulated CANN version. No CANN library
    is there. Where ASCEND_HOME_PATH is set already, it is left as it is."""
    if "ASCEND_HOME_PATH" in os.environ:
        return
    from pathlib import Path

    version = cann_version()
    home = Path(site) / "cann" / version
    if not (home / "ascend_toolkit_install.info").is_file():
        for sub in ("runtime", "compiler", "opp"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        tmp = home / f"ascend_toolkit_install.info.{os.getpid()}"
        tmp.write_text(f"package_name=Ascend-cann-toolkit\nversion={version}\n")
        os.replace(tmp, home / "ascend_toolkit_install.info")
    os.environ["ASCEND_HOME_PATH"] = str(home)
    os.environ.setdefault("ASCEND_OPP_PATH", str(home / "opp"))


_state: dict[str, Any] = {}


def _host_count() -> int:
    from ... import envs

    n = envs.get("CUDASHIM_NPU_DEVICES")  # EnvError (a CudashimError) names a malformed value
    if n is not None:
        return int(n)  # type: ignore[call-overload]
    from ... import hardware

    return hardware.device_count("ascend", hardware.SIMULATED_ASCEND_ROOT)


def physical_ids(environ: "dict[str, str] | os._Environ[str] | None" = None) -> list[int]:
    """The physical NPUs this process sees, in npu:N order (ASCEND_RT_VISIBLE_DEVICES applied)."""
    env = os.environ if environ is None else environ
    total = _host_count()
    raw = env.get("ASCEND_RT_VISIBLE_DEVICES")
    if raw is None or raw.strip() == "":
        return list(range(total))
    ids: list[int] = []
    for part in raw.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= total:
            raise CudashimError(f"ASCEND_RT_VISIBLE_DEVICES={raw!r}: {part!r} is not one of the simulated host's "
                                f"NPUs 0..{total - 1}; list ids below {total} or raise CUDASHIM_NPU_DEVICES")
        if int(part) in ids:
            raise CudashimError(f"ASCEND_RT_VISIBLE_DEVICES={raw!r} lists NPU {part} twice; list each id once")
        ids.append(int(part))
    return ids


def visible_count() -> int:
    return len(physical_ids())


def start(torch: Any) -> Any:
    """Load the core keyed to PrivateUse1, name it npu, set the device count; returns the core."""
    if "core" in _state:
        return _state["core"]
    from .._build import load

    if torch._C._get_privateuse1_backend_name() != DEVICE_TYPE:
        torch.utils.rename_privateuse1_backend(DEVICE_TYPE)
    from .. import profiles
    from ..memory import configure
    from ..synchronizing import register_operators

    profile = profiles.active("npu")  # CUDASHIM_PROFILE: the Ascend part the devices present
    mod = load("PrivateUse1")
    from .coverage import install

    install(mod)  # torch_npu's operator table: operators outside it take torch_npu's CPU fallback
    register_operators(mod)  # after the table (it decides which kernels are direct), before any operator runs
    n = visible_count()
    mod.set_device_count(n)
    configure(mod, profile, _host_total())
    if profile is not None:
        from .. import preflight

        preflight.start(mod, profile, DEVICE_TYPE)
    _state["profile"] = profile
    _state["core"] = mod
    # the shim's first (and only unasked) log line: nobody may take this run for an NPU run
    sys.stderr.write(f"cudashim: platform ascend SIMULATED on the CPU (CUDASHIM_SIMULATE=1): {n} simulated "
                     f"npu devices, simulated CANN {cann_version()} (CUDASHIM_CANN_VERSION), no NPU is used\n")
    return mod


def _host_total() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def profile() -> Any:
    """The device profile the simulated NPUs present (emulated/profiles/), or None."""
    return _state.get("profile")


def started() -> bool:
    return "core" in _state


def core() -> Any:
    """The loaded core (start() first)."""
    return _state["core"]
