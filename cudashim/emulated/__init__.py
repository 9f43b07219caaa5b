"""Python side of the emulated devices (docs/design.md §4): the cuda device on the CPU, the simulated
Ascend NPU (emulated.npu).

The emulated CUDA device: `cuda:N` tensors in host memory, run by PyTorch's CPU kernels.

The native core (csrc/, built and cached by _build) registers a device guard, a host allocator
with exact statistics, per-device generators and the kernels of the CUDA dispatch key: its own
allocation, copy and view kernels, and a fallback that runs every other operator's CPU kernel on CPU
views of the same memory. This package makes torch.cuda and torch.accelerator the device module
over it. install() runs after `import torch` (the import hook's alias step), never in the
bootstrap; if the core cannot be built or loaded it raises EmulatedBuildError naming the fix.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from ._build import EmulatedBuildError, load

__all__ = ["install", "uninstall", "installed", "core", "EmulatedBuildError"]

_state: dict[str, Any] = {}


def installed() -> bool:
    return "core" in _state


def core() -> Any:
    """The loaded native core (install() first)."""
    return _state["core"]


def install(bindings: Any, *, when_imported: Callable[[str, Callable[[Any], None]], None]) -> Any:
    """Make torch.cuda / torch.accelerator the device module of the emulated device; returns it.

    bindings: the caller's restorable bindings; when_imported: the one import hook's post-import
    callbacks (this package sits below the alias step and imports none of it).
    """
    import torch

    from .. import visibility
    from ..platform import cpu_views
    from . import accelerator, compile, cpu_build, cuda_only, distributed, graphs, ipc, nccl, profiles, streams
    from .cuda import DeviceModule, nvtx_table
    from .memory import bind_allocator_apis, bind_storage_resize, configure
    from .synchronizing import register_operators
    from .properties import host_properties, mem_get_info, profile_properties

    profile = profiles.active("cuda")  # CUDASHIM_PROFILE: the GPU the devices present (ProfileError names a bad one)
    mod = load("CUDA")
    register_operators(mod)  # before any operator runs on the device
    cuda_only.register(torch)  # operators only CUDA implements: a kernel each, or a CapabilityError naming it
    # CUDASHIM_CPU_DEVICES, else LOCAL_WORLD_SIZE (a launcher's ranks each set_device(local_rank)), else 1;
    # CUDA_VISIBLE_DEVICES narrows it as on a GPU host
    mod.set_device_count(visibility.cpu_device_count())
    configure(mod, profile, mem_get_info()[1])
    if profile is not None:
        from . import preflight

        preflight.start(mod, profile)  # peaks, largest request, first misfit: at exit and in the report
    properties = host_properties if profile is None else (lambda: profile_properties(profile))
    dm = DeviceModule(torch, mod, properties, mem_get_info)
    _state["core"] = mod
    _state["dm"] = dm
    cuda = torch.cuda
    subs = [m for n, m in list(sys.modules.items()) if n.startswith("torch.cuda.") and m is not None]

    def bind(name: str, value: Any, treatment: str = "emulated") -> None:
        orig = getattr(cuda, name, None)
        bindings.bind(cuda, name, value, f"torch.cuda.{name}", treatment)
        for m in subs:  # `from torch.cuda.memory import memory_allocated` and torch.cuda.random's imports
            if orig is not None and getattr(m, name, None) is orig:
                bindings.bind(m, name, value)

    for name, value in dm.table().items():
        bind(name, value)
    for name, value in streams.table(torch, dm.index, cpu_build.alias_class, join=mod.capture_join).items():
        bind(name, value)
    for name, value in nvtx_table().items():  # a CPU build's torch.cuda.nvtx raises "NVTX functions not installed"
        bindings.bind(torch.cuda.nvtx, name, value, f"torch.cuda.nvtx.{name}", "emulated")
    # a random kernel advances its generator's offset by rounds of the grid, as on a GPU of these properties
    props = host_properties()
    mod.set_philox_round_threads(props.multi_processor_count * props.max_threads_per_multi_processor)
    # torch.cuda's own seeding and lazy-init code runs unchanged once the device counts as initialized
    bindings.bind(cuda, "default_generators", dm.generators())
    bindings.bind(cuda, "_initialized", True)
    for name, value in accelerator.table(torch, dm).items():
        if hasattr(torch.accelerator, name):
            bindings.bind(torch.accelerator, name, value, f"torch.accelerator.{name}", "emulated")
    cpu_build.bind(bindings, torch, dm.index)  # storages, legacy types, DataParallel's comm
    compile.bind(bindings, installed, when_imported)
    distributed.bind(bindings, torch, mod)
    nccl.bind(bindings, torch)  # NCCL groups are Gloo groups that answer as NCCL's
    bind_storage_resize(bindings, torch, mod)  # FSDP2 frees and re-allocates parameters this way
    bind_allocator_apis(bindings, torch, mod, dm.memory)  # caching_allocator_alloc, _snapshot, host_memory_stats
    graphs.bind(bindings, torch, mod)  # CUDA graphs: capture records, replay re-runs (csrc/graphs/graph.cpp)
    ipc.bind(bindings, torch, mod)  # device tensors across processes: CUDA IPC over shared host memory
    # replacement kernels written with torch operators read cuda tensors over their host memory
    bindings.bind(cpu_views, "views", {**cpu_views.views, "cuda": mod.cpu_view})
    return dm


def uninstall() -> None:
    """Forget the device module (the caller restores its bindings). The native core stays loaded:
    its kernels and guard remain registered with torch for the life of the process."""
    from . import compile

    if _state:
        compile.restore_gpu_types()
    _state.clear()
