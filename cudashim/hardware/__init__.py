"""Hardware discovery without torch and without a device context.

Everything reads under an injectable root (argument, else $CUDASHIM_SYSROOT, else the packaged simulated
Ascend host when CUDASHIM_SIMULATE=1 with platform ascend, else '/'; see device.py), so tests and
`cudashim doctor` can point it at a fake tree. Importing this package
imports neither torch nor pynvml (NVML is loaded inside nvidia.query_nvml only).

- accelerator_kind(root=None) -> 'ascend' | 'nvidia' | 'cpu' (Ascend first; cached per root,
  cleared by cudashim._state.reset(), which names this package)
- device_count(kind=None, root=None)
- discover_gpus(root=None, nvml=None) -> [GpuDevice]; query_nvml()
- discover_npu_devices(root=None) -> [NpuDevice(entry, physical_id, numa_node)]; npu_numa_node(index)
- physical_cores_by_numa(root=None), numa_cpus(root=None)
- visible.py: visible_device_env_name(kind=None), visible_device_ids(value, name), assign_visible_devices(...)

Detection (accelerator_kind, device_count) is defined here, over the root and listing helpers of
_fs.py (the I/O seam's primitives, which the vendor modules import instead of this package): every
shimmed interpreter runs it before user code. The other names resolve lazily (PEP 562) from their
submodules: the vendor modules and cpu.py's parsers.
"""

import sys

from ._fs import (
    SIMULATED_ASCEND_ROOT,
    ascend_node_listed,
    join,
    list_dir,
    nvidia_node_listed,
    resolve_root,
    simulated_root,
)

# on the start-up path of every shimmed process: no typing and no `from __future__ import
# annotations` (each one more import); annotations naming typing's names are strings, and Kind is
# looked up on first access
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from .._platforms import Platform as Kind
    from ..errors import HardwareError
    from .ascend import NpuDevice, discover_npu_devices, npu_numa_node
    from .cpu import numa_cpus, physical_cores_by_numa
    from .nvidia import GpuDevice, NvmlDevice, discover_gpus, query_nvml

__all__ = [
    "KINDS",
    "SIMULATED_ASCEND_ROOT",
    "simulated_root",
    "Kind",
    "HardwareError",
    "GpuDevice",
    "NvmlDevice",
    "NpuDevice",
    "accelerator_kind",
    "device_count",
    "discover_gpus",
    "query_nvml",
    "discover_npu_devices",
    "npu_numa_node",
    "numa_cpus",
    "physical_cores_by_numa",
]

# public name -> submodule defining it (HardwareError: the package's one errors module)
_LAZY: dict[str, str] = {
    "HardwareError": "..errors",
    "GpuDevice": "nvidia", "NvmlDevice": "nvidia", "discover_gpus": "nvidia", "query_nvml": "nvidia",
    "NpuDevice": "ascend", "discover_npu_devices": "ascend", "npu_numa_node": "ascend",
    "numa_cpus": "cpu", "physical_cores_by_numa": "cpu",
}


def __getattr__(name: str) -> object:
    if name == "Kind":  # the type of a platform name (a plain str at run time)
        from .._platforms import Platform

        kind = globals()["Kind"] = Platform
        return kind
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = "cudashim.errors" if sub == "..errors" else f"{__name__}.{sub}"
    __import__(module)  # not importlib.import_module: detection runs before user code, importlib costs
    value = getattr(sys.modules[module], name)
    globals()[name] = value  # once resolved, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# ---------------------------------------------------------------------------------------------------
# Detection: which accelerator this machine has, answered from the file system alone, cached per root.

from .._platforms import PLATFORMS as KINDS  # noqa: E402 - detection answers one of the platforms

# resolved root -> kind; devices are not hot-plugged under a running program, so one answer per
# process is right, and the bootstrap asks more than once
_kind_cache: "dict[str, Kind]" = {}


def _reset() -> None:
    """Forget the detected kinds: cudashim._state.reset() calls this (named in its _START_UP, so that
    detection, on every shimmed start-up, does not import the registry)."""
    _kind_cache.clear()


def accelerator_kind(root: str | None = None) -> "Kind":
    """'ascend' | 'nvidia' | 'cpu'. Ascend is checked first: a machine with both drivers is an Ascend machine
    (the NVIDIA driver there is incidental, and the Ascend probe is the cheaper miss elsewhere)."""
    key = resolve_root(root)
    kind = _kind_cache.get(key)
    if kind is None:
        dev_names = list_dir(join(key, "/dev"), sort=False)  # both probes need it: list it once
        kind = "cpu"
        if ascend_node_listed(dev_names):
            kind = "ascend"
        elif any(n.startswith("udma") for n in list_dir(join(key, "/sys/class/ubcore"), sort=False)):
            from . import ascend  # whether a ubcore entry is live takes reading its unit count

            if ascend.is_available(key, dev_names):
                kind = "ascend"
        if kind == "cpu":
            if nvidia_node_listed(dev_names):
                kind = "nvidia"
            elif list_dir(join(key, "/proc/driver/nvidia/gpus"), sort=False):
                from . import nvidia  # whether an entry is a GPU takes parsing its bus id

                if nvidia.is_available(key, dev_names):
                    kind = "nvidia"
        _kind_cache[key] = kind
    return kind


def device_count(kind: str | None = None, root: str | None = None) -> int:
    """How many devices of `kind` (default: the detected one) the tree shows; 0 for cpu.

    Counts come from the file system only (no npu-smi, no NVML), so this is as cheap as detection.
    """
    kind = accelerator_kind(root) if kind is None else kind
    if kind == "ascend":
        from . import ascend

        entries = ascend.ubcore_entries(root)
        return len(entries) if entries else len(ascend.davinci_indices(root))
    if kind == "nvidia":
        from . import nvidia

        return len(nvidia.proc_bus_ids(root)) or len(nvidia.device_node_indices(root))
    if kind == "cpu":
        return 0
    from ..errors import HardwareError  # imported to raise: detection's path never needs it

    raise HardwareError(f"unknown accelerator kind {kind!r}; use one of {', '.join(KINDS)}")
