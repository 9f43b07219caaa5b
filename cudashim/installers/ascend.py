"""The Ascend alias layer: torch_npu's own ``transfer_to_npu``, then the gaps real engines hit.

Run by the import hook right after ``import torch`` when the platform is ``ascend``:

1. ``import torch_npu`` and ``torch_npu.contrib.transfer_to_npu``: upstream maps ``torch.cuda.*`` onto
   ``torch.npu.*``, device arguments ``cuda`` → ``npu``, NCCL → HCCL. We do not redo any of it.
2. The gaps, each a small binding undone by ``uninstall()``:

   * ``torch.npu.Stream.cuda_stream`` → ``npu_stream`` (code hands the raw stream to C++/libraries);
   * ``torch.cuda.CUDAGraph(keep_graph=…)`` accepted, the argument dropped: an NPU graph exists only
     instantiated. ``instantiate()`` is a no-op for the same reason. ``raw_cuda_graph()`` /
     ``raw_cuda_graph_exec()`` — what keep_graph is for (in-graph event timers) — raise CapabilityError;
   * ``torch.cuda.graph(cuda_graph=…, pool, stream, capture_error_mode)`` mapped onto the NPU signature
     (``npu_graph`` first, ``auto_dispatch_capture`` fourth: a positional CUDA call would be misread);
   * ``torch.cuda.memory.*`` answered by ``torch_npu.npu.memory`` where it has the same function, and
     ``torch.cuda.memory._set_allocator_settings("k:v,…")`` honoured or refused key by key
     (_ascend_memory.py, ALLOCATOR_KEYS: only expandable_segments can change at run time on the NPU);
   * the probe list (cudashim/installers/probes.py): TileLang's target detection and friends see the real
     ``torch.cuda.is_available()`` (False on an NPU-only host) while they run;
   * the capability table's Ascend rows enforced where an engine asks for them (_ascend_enforce.py,
     ENFORCED: symmetric memory, PDL, batch-invariant mode; graph timers at raw_cuda_graph()) through
     ``cudashim.platform.capabilities.require``;
   * what the CUDA idiom table found failing on the simulated NPU that fails on the real path too
     (_ascend_gaps.py: NVTX markers, legacy ``torch.cuda.*Tensor`` names in ``Tensor.type``, ``is_cuda``
     in compiled code, ``nn.DataParallel`` refused);
   * Triton, once imported: triton-ascend's libdevice mapped, or upstream Triton's first launch refused
     naming triton-ascend (triton_route/ascend_hardware.py); on the simulated NPU, triton-ascend's
     refusals and language names (triton_route/ascend.py).

``torch.version.cuda`` policy: left as it is (``None`` with the CPU torch that torch_npu runs on).
It names the CUDA toolkit torch was built against; code reads it to choose nvcc, cuBLAS or Triton's
CUDA backend, none of which can load here. Faking a version would send those libraries to CUDA
binaries that fail later and less clearly. "Is there an accelerator?" is ``torch.cuda.is_available()``,
which is True.

``uninstall()`` removes our gap fillers; what transfer_to_npu did stays (upstream has no undo).
Verification level: L1 — tests/ascend/ composes this with the real transfer_to_npu.py from the
torch-npu 2.13.0 wheel over CPU torch; no NPU behaviour is verified here.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

from .. import report, triton_route
from ..platform import capabilities
from ..errors import CapabilityError, CudashimError
from . import probes
from ._common import Bindings, when_imported
from ._ascend_enforce import ENFORCED, enforce_capabilities
from ._ascend_gaps import fill_gaps
from ._ascend_memory import ALLOCATOR_KEYS, fill_memory

__all__ = ["install", "uninstall", "installed", "ALLOCATOR_KEYS", "ENFORCED"]

PLATFORM = "ascend"

_bindings = Bindings()
_installed = False


def installed() -> bool:
    return _installed


def _import_torch_npu() -> ModuleType:
    from .. import hardware

    if hardware.simulated_root() is not None:
        # CUDASHIM_SIMULATE=1: the simulated torch_npu (cudashim/emulated/npu/site.py), which is the
        # wheel's transfer_to_npu and friends over the emulated device keyed to PrivateUse1
        from ..emulated.npu import site

        site.prepare()
    try:
        return importlib.import_module("torch_npu")
    except ImportError as exc:
        raise CudashimError(
            f"torch_npu cannot be imported on platform ascend ({exc}); install the torch-npu build matching "
            "your torch (pip install torch-npu==<torch version>), or set CUDASHIM_PLATFORM=cpu to run on the CPU"
        ) from exc


def _real_is_available(torch: Any) -> Callable[[], bool]:
    # transfer_to_npu keeps the pre-patch function as its module global `is_available`; when it ran
    # before us (the user imported it) that is the truth, otherwise torch.cuda's own still is
    upstream = sys.modules.get("torch_npu.contrib.transfer_to_npu")
    real = getattr(upstream, "is_available", None)
    return real if callable(real) else torch.cuda.is_available


# ---- streams -------------------------------------------------------------------------------------------

def _cuda_stream(self: Any) -> int:
    return self.npu_stream


def _fill_streams(npu: Any) -> None:
    getter: Callable[[Any], int] = _cuda_stream
    if report.enabled():
        getter = report.wrap("torch.cuda.Stream.cuda_stream", "aliased", _cuda_stream)
    for name in ("Stream", "ExternalStream", "SyncLaunchStream"):
        cls = getattr(npu, name, None)
        if isinstance(cls, type) and "cuda_stream" not in vars(cls):
            _bindings.bind(cls, "cuda_stream", property(getter, doc="The NPU stream handle (npu_stream)."))


# ---- graphs --------------------------------------------------------------------------------------------

def _make_graph_classes(npu: Any) -> tuple[type, type] | None:
    NPUGraph, npu_graph_ctx = getattr(npu, "NPUGraph", None), getattr(npu, "graph", None)
    if not isinstance(NPUGraph, type) or not isinstance(npu_graph_ctx, type):
        return None

    class CUDAGraph(NPUGraph):  # type: ignore[misc, valid-type]
        """torch.cuda.CUDAGraph on ascend: a torch.npu.NPUGraph that takes CUDA's arguments."""

        def __new__(cls, keep_graph: bool = False) -> Any:
            return super().__new__(cls)

        def __init__(self, keep_graph: bool = False) -> None:
            # an NPU graph exists only instantiated: there is no raw graph to keep
            super().__init__()
            self.cudashim_keep_graph_requested = bool(keep_graph)

        def instantiate(self) -> None:
            """A no-op: an NPU graph is instantiated when its capture ends."""
            report.record("torch.cuda.CUDAGraph.instantiate", "emulated")
            capabilities.require("cuda_graph_instantiate", PLATFORM, api="torch.cuda.CUDAGraph.instantiate")

        def raw_cuda_graph(self) -> int:
            report.record("torch.cuda.CUDAGraph.raw_cuda_graph", "unsupported")
            capabilities.require("cuda_graph_keep_graph", PLATFORM, api="torch.cuda.CUDAGraph.raw_cuda_graph")
            capabilities.require("graph_event_timers", PLATFORM, api="torch.cuda.CUDAGraph.raw_cuda_graph")
            raise CapabilityError("torch.cuda.CUDAGraph.raw_cuda_graph is not available on ascend; "
                                  "NPU graphs have no raw cudaGraph_t [capability cuda_graph_keep_graph]")

        def raw_cuda_graph_exec(self) -> int:
            report.record("torch.cuda.CUDAGraph.raw_cuda_graph_exec", "unsupported")
            capabilities.require("graph_event_timers", PLATFORM, api="torch.cuda.CUDAGraph.raw_cuda_graph_exec")
            raise CapabilityError("torch.cuda.CUDAGraph.raw_cuda_graph_exec is not available on ascend; "
                                  "NPU graphs have no cudaGraphExec_t [capability graph_event_timers]")

    class graph(npu_graph_ctx):  # type: ignore[misc, valid-type]
        """torch.cuda.graph on ascend: CUDA's signature mapped onto torch.npu.graph's."""

        def __init__(self, cuda_graph: Any = None, pool: Any = None, stream: Any = None,
                     capture_error_mode: str = "global", *, npu_graph: Any = None,
                     auto_dispatch_capture: bool = False) -> None:
            g = cuda_graph if cuda_graph is not None else npu_graph
            if g is None:
                raise TypeError("torch.cuda.graph() needs the graph to capture into: "
                                "torch.cuda.graph(torch.cuda.CUDAGraph()) or cuda_graph=...")
            super().__init__(g, pool=pool, stream=stream, auto_dispatch_capture=auto_dispatch_capture,
                             capture_error_mode=capture_error_mode)

    for cls, name in ((CUDAGraph, "CUDAGraph"), (graph, "graph")):
        cls.__module__, cls.__qualname__, cls.__name__ = "torch.cuda", name, name
    return CUDAGraph, graph


def _fill_graphs(torch: Any, npu: Any) -> None:
    made = _make_graph_classes(npu)
    if made is None:  # a torch_npu without graphs: the cuda_graphs capability row says what fails
        return
    CUDAGraph, graph = made
    owners = [torch.cuda]
    graphs_mod = sys.modules.get("torch.cuda.graphs")
    if graphs_mod is not None:  # `from torch.cuda.graphs import CUDAGraph` too
        owners.append(graphs_mod)
    for owner in owners:
        _bindings.bind(owner, "CUDAGraph", CUDAGraph, api="torch.cuda.CUDAGraph")
        _bindings.bind(owner, "graph", graph, api="torch.cuda.graph")


# ---- report --------------------------------------------------------------------------------------------

def _report_aliases(torch: Any, npu: Any) -> None:
    # transfer_to_npu bound torch.cuda.X to torch.npu.X; re-bind each through the report so calls count
    for name in getattr(npu, "__all__", ()):
        value = getattr(torch.cuda, name, None)
        if value is None or value is not getattr(npu, name, None) or not callable(value):
            continue
        _bindings.bind(torch.cuda, name, value, api=f"torch.cuda.{name}")


# ---- Triton ----------------------------------------------------------------------------------------------

def _wire_triton() -> None:
    """Once triton is imported: on a real NPU host triton-ascend wired or upstream Triton refused
    (triton_route/ascend_hardware.py); on the simulated NPU triton-ascend's refusals and names
    (triton_route/ascend.py)."""
    from .. import hardware

    simulated = hardware.simulated_root() is not None
    if simulated:  # launches run as on the emulated device, with triton-ascend's launch check first
        from ..triton_route import ascend

        triton_route.install(PLATFORM)
        triton_route.add_launch_check(PLATFORM, ascend.check_launch)

    def on_triton(mod: Any) -> None:
        if not _installed:
            return
        if simulated:
            from ..triton_route import ascend

            ascend.install()
        else:
            from ..triton_route import ascend_hardware

            ascend_hardware.install(mod)

    when_imported("triton", on_triton)


def _unwire_triton() -> None:
    from ..triton_route import ascend, ascend_hardware

    triton_route.remove_launch_check(PLATFORM, ascend.check_launch)
    ascend.uninstall()
    ascend_hardware.uninstall()


# ---- entry points --------------------------------------------------------------------------------------

def install() -> None:
    """transfer_to_npu, then the gap fillers. Idempotent; torch must be imported already."""
    global _installed
    if _installed:
        return
    torch = importlib.import_module("torch")
    torch_npu = _import_torch_npu()
    real = _real_is_available(torch)
    importlib.import_module("torch_npu.contrib.transfer_to_npu")
    npu = torch_npu.npu
    _installed = True
    try:
        _fill_streams(npu)
        _fill_graphs(torch, npu)
        fill_memory(_bindings, torch, npu)
        probes.install(PLATFORM, real)
        enforce_capabilities(_bindings, lambda: _installed)
        fill_gaps(_bindings, torch, lambda: _installed)
        _wire_triton()
        if report.enabled():
            _report_aliases(torch, npu)
    except BaseException:
        uninstall()
        raise


def uninstall() -> None:
    """Remove the gap fillers (transfer_to_npu's own changes stay: upstream has no undo). Idempotent."""
    global _installed
    _installed = False
    triton_route.uninstall()
    probes.uninstall()
    _unwire_triton()
    _bindings.restore()


from .._state import on_reset  # noqa: E402

on_reset(uninstall)
