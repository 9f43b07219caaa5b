"""Where torch differs between the releases and builds the shim supports: every such decision, here.

The shim lives on torch's internals (dispatcher registrations, hook and guard registries, torch._C's
CUDA entry points, Inductor's and torch_npu's Python files), which move at every release and differ
between a CPU and a CUDA build. Each decision below is made by probing the loaded torch for the thing
itself, never by comparing version strings, with two exceptions whose answer *is* a release: the
supported range (what CI and `scripts/test --matrix` run) and the torch-npu release whose Python files
the simulated NPU runs (torch-npu X.Y.Z is built for torch X.Y, so the installed torch chooses it).

The native core makes its own decisions by probing too (csrc/ops/torch_cuda.cpp: which operators
torch's CUDA backend registered kernels for; csrc/runtime/hooks.cpp: whose CUDA hooks are there);
decisions() lists them with the Python ones, for `cudashim doctor` and the tests.

Imports nothing at module level but the standard library and the error hierarchy; the probes take
the torch module as an argument, so nothing here imports torch on its own.
"""

from __future__ import annotations

import importlib
import re
from importlib import metadata
from typing import Any

from .errors import CudashimError

__all__ = ["SUPPORTED", "SUPPORTED_SPEC", "NPU_RELEASES", "UnsupportedTorchError", "release", "check_supported",
           "cuda_build", "binds_over_cuda_entry", "flat_all_gathers", "triton_tma_probe", "torch_npu_release",
           "installed_torch_version", "decisions"]

#: the oldest and newest torch minor releases the shim is tested with (both ends included)
SUPPORTED = ((2, 13), (2, 15))
#: the same as a requirement specifier (pyproject.toml's comment and the README say it; a test checks them)
SUPPORTED_SPEC = ">=2.13,<2.16"
#: torch (major, minor) -> the torch-npu release whose Python files the simulated NPU runs over it. A
#: release absent here (torch 2.15: no torch-npu for it yet) takes the newest one below it.
NPU_RELEASES = {(2, 13): "2.13.0", (2, 14): "2.14.0"}


class UnsupportedTorchError(CudashimError, RuntimeError):
    """The installed torch is outside the releases the shim supports."""


def release(version: str) -> tuple[int, int]:
    """'2.14.1+cu130' -> (2, 14); anything unreadable -> (0, 0)."""
    m = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _range_text() -> str:
    (lo_a, lo_b), (hi_a, hi_b) = SUPPORTED
    return f"torch {lo_a}.{lo_b} to {hi_a}.{hi_b} ({SUPPORTED_SPEC}), CPU or CUDA build"


def check_supported(torch: Any) -> None:
    """Raise UnsupportedTorchError, naming the supported range and the fix, for a torch outside it.

    Called at activation, before the emulated device registers anything with torch: an unsupported
    torch would otherwise fail inside a registration (an abort, no Python error) or at its first
    operator.
    """
    version = str(getattr(torch, "__version__", "?"))
    have = release(version)
    if SUPPORTED[0] <= have <= SUPPORTED[1]:
        return
    raise UnsupportedTorchError(
        f"cudashim supports {_range_text()}; this environment has torch {version}. Install a supported one "
        f"(pip install 'torch{SUPPORTED_SPEC}'), or set CUDASHIM_PLATFORM=nvidia on a GPU host to leave torch "
        f"untouched, or CUDASHIM_DISABLE=1 to run without the shim")


def cuda_build(torch: Any) -> bool:
    """torch is a CUDA build: torch._C has CUDA's own Python entry points (_cuda_getDeviceCount).

    Where the emulated device serves CUDA on such a build (no GPU found), those entry points ask a
    driver that is not there; the device binds its own over them (binds_over_cuda_entry), as it
    supplies the ones a CPU build lacks, and torch.backends.cudnn answers "not available" as a CPU
    build's does (emulated/cpu_build.py); Inductor's CUDA-graph pool hooks in torch._C are the device's
    on both builds (emulated/graph_trees.py). The core replaces the build's CUDA kernels (torch_cuda.cpp).
    """
    return hasattr(getattr(torch, "_C", None), "_cuda_getDeviceCount")


def binds_over_cuda_entry(torch: Any, name: str) -> bool:
    """The emulated device binds torch._C.<name>: a CPU build lacks it, a CUDA build's asks the driver."""
    return not hasattr(torch._C, name) or cuda_build(torch)


def flat_all_gathers(c10d: Any) -> list[str]:
    """torch.distributed's flat all-gathers this torch has, each bound to the device's: all_gather_into_tensor
    and _all_gather_base, and all_gather_single where torch has it (2.13 added it, and the other two call
    it; SyncBatchNorm's NCCL branch gathers into a (1, world * n) buffer with it)."""
    return [n for n in ("all_gather_into_tensor", "all_gather_single", "_all_gather_base") if hasattr(c10d, n)]


def triton_tma_probe(triton_utils: Any) -> str | None:
    """The name of torch.utils._triton's device probe for Triton's TMA (tensor descriptors), which the
    simulated NPU answers for the npu as torch_npu's Inductor backend does: _device_supports_tma until
    2.13, _device_supports_tensor_descriptor from 2.14 (it asks torch.cuda's capability, None on npu)."""
    names = ("_device_supports_tensor_descriptor", "_device_supports_tma")
    return next((n for n in names if hasattr(triton_utils, n)), None)


def installed_torch_version() -> str | None:
    """The installed torch's version, from its metadata (no import: the bootstrap may ask)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def torch_npu_release(torch_version: str | None = None) -> str:
    """The torch-npu release the simulated NPU runs for this torch (default: the installed one).

    torch-npu's Python files call torch's Python internals of the release they were built for, so the
    pairing follows torch's own (torch-npu X.Y.Z requires torch X.Y); a torch newer than every
    release here takes the newest, one older the oldest.
    """
    have = release(torch_version or installed_torch_version() or "")
    known = sorted(NPU_RELEASES)
    below = [r for r in known if r <= have]
    return NPU_RELEASES[below[-1] if below else known[0]]


def decisions(torch: Any, core: Any = None) -> dict[str, Any]:
    """Every decision this torch gets, by name (core: the loaded native core, for its own)."""
    out: dict[str, Any] = {
        "torch": str(torch.__version__),
        "supported": SUPPORTED[0] <= release(str(torch.__version__)) <= SUPPORTED[1],
        "cuda_build": cuda_build(torch),
        "flat_all_gathers": (flat_all_gathers(torch.distributed.distributed_c10d)
                             if torch.distributed.is_available() else []),
        "torch_npu_release": torch_npu_release(str(torch.__version__)),
        "triton_tma_probe": triton_tma_probe(importlib.import_module("torch.utils._triton")),
    }
    if core is not None and hasattr(core, "torch_cuda_kernels_replaced"):
        out["torch_cuda_kernels_replaced"] = int(core.torch_cuda_kernels_replaced())
    return out
