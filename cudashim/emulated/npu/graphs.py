"""torch_npu._C's graph natives on the simulated NPU, over the core's graph recorder (csrc/graphs/graph.cpp).

The wheel's own torch_npu/npu/graphs.py runs as it is (site.py, REAL_FILES): NPUGraph, graph,
graph_pool_handle and make_graphed_callables are torch_npu's Python. What it calls in torch_npu._C is
here: _NPUGraph is the core's graph (the one registered for the npu device type as
torch.accelerator.Graph's implementation, the same recorder the emulated cuda device uses), with
the checks torch_npu makes in C++ before and after capture, in its words. Each rule names its source
in Ascend/pytorch at the commit the operator table names (torch_npu_ops.json):

  * NPUGraph::capture_begin, torch_npu/csrc/core/npu/NPUGraph.cpp: TASK_QUEUE_ENABLE=2 refused
    (OptionsManager::GetTaskQueueEnable: 0 under ASCEND_LAUNCH_BLOCKING=1, default 1); a graph that
    already owns a capture refused; capture on the default stream refused.
  * the _NPUGraph binding, torch_npu/csrc/npu/Graph.cpp: capture_error_mode is global, thread_local
    or relaxed; register_generator_state is a deprecated no-op (generator states are registered
    when a random operator first runs inside the capture).
  * NPUGraph::capture_end: it must end on the stream it began on. NPUGraph::replay / pool(): only
    after a successful capture.
  * synchronising calls inside a capture (torch.npu.synchronize, .item(), a blocking copy to the
    host): torch_npu passes them to CANN (aclrtSynchronizeDevice, aclrtMemcpy), whose stream
    capture refuses them; torch_npu raises the ACL error through NPU_CHECK_ERROR
    (torch_npu/csrc/core/npu/NPUException.h). The core refuses them here with the words
    set_capture_words gives it; CANN's own error code is not known to the simulator and not shown.
    A refused call on the capturing stream (.item(), a blocking copy) leaves the capture going, as
    CANN's does; torch.npu.synchronize() invalidates it.

What the simulator does not do: the graph-task update of auto_dispatch_capture (aclmdlRICaptureTaskGrp*,
the FIA / paged-attention handlers' parameter update) raises CapabilityError; super kernels are
accepted and change nothing (they are a scheduling optimisation of the recorded graph).
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

from ...errors import CapabilityError

__all__ = ["natives", "refusing_synchronize", "SOURCE", "CAPTURE_WORDS"]

#: where the rules below are read from (the commit of Ascend/pytorch the 2.13.0 operator table names)
SOURCE = "Ascend/pytorch@94c0533ba69b855a8d60dba28badb02bf2d249f3"

_MODES = ("global", "thread_local", "relaxed")
#: natives.py's CannRequired maker (given by natives.build: this module is imported from there)
_NEEDS_CANN: list[Any] = []
_handles = itertools.count(1)

#: the core's words for a call a capture refuses (a synchronising call; the default stream joining a
#: capture), on the simulated NPU: torch_npu's NPU_CHECK_ERROR shape ("NPU function error: <call>, error
#: code is ...", NPUException.h) naming the call; the code is CANN's and is not reproduced
CAPTURE_WORDS = {
    "refused": "NPU function error: {what}: not permitted while a stream is being captured into an NPU graph "
               "(CANN's stream capture refuses it; the simulator does not reproduce CANN's error code)",
    "invalidated": "NPU function error: aclmdlRICaptureEnd: the capture was invalidated by an earlier refusal ({what})",
}


def _refuse(message: str) -> RuntimeError:
    """torch_npu's refusal, counted by the readiness report when it is on (report.readiness.capture_refused)."""
    readiness = sys.modules.get("cudashim.report.readiness")
    if readiness is not None:
        readiness.capture_refused(message)
    return RuntimeError(message)


def _pta(code: str) -> str:
    """PTA_ERROR(ErrCode::X)'s tail, as the wheel's own utils/_error_code.py renders it."""
    from torch_npu.utils._error_code import ErrCode, pta_error

    return pta_error(getattr(ErrCode, code))


def _task_queue_enable() -> int:
    # OptionsManager::GetTaskQueueEnable (torch_npu/csrc/core/npu/register/OptionsManager.cpp)
    if os.environ.get("ASCEND_LAUNCH_BLOCKING", "0").strip() == "1":
        return 0
    raw = os.environ.get("TASK_QUEUE_ENABLE")
    try:
        return int(raw) if raw is not None else 1
    except ValueError:
        return 1


def _graph_class(torch: Any, core: Any) -> type:
    base = torch._C._acceleratorGraph

    class _NPUGraph(base):  # type: ignore[misc, valid-type]
        """torch_npu._C._NPUGraph: the core's recorder with NPUGraph.cpp's checks."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return super().__new__(cls, False)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(False)
            self._cudashim_stream = None
            self._cudashim_exec = False

        def capture_begin(self, pool: Any = None, capture_error_mode: str = "global", report_shape: bool = False) -> None:
            if capture_error_mode not in _MODES:  # Graph.cpp's binding
                raise _refuse("Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, "
                                   f"got {capture_error_mode}")
            if _task_queue_enable() == 2:
                raise _refuse("Do not support TASK_QUEUE_ENABLE = 2 during NPU graph capture, please export "
                                   "TASK_QUEUE_ENABLE=1/0." + _pta("NOT_SUPPORT"))
            if self._cudashim_exec:
                raise _refuse("This NPUGraph instance already owns a captured graph. To capture a new graph, "
                                   "create a new instance.")
            stream = torch.npu.current_stream()
            if stream == torch.npu.default_stream():
                raise _refuse("NPU graphs must be captured on a non-default stream. (However, after capture, "
                                   "it's ok to replay them on the default stream.)")
            super().capture_begin(pool=None if pool is None else tuple(pool), capture_error_mode=capture_error_mode)
            self._cudashim_stream = stream

        def capture_end(self) -> None:
            if self._cudashim_stream is not None and torch.npu.current_stream() != self._cudashim_stream:
                raise _refuse("Capture must end on the same stream it began on.")
            super().capture_end()
            self._cudashim_exec = True

        def replay(self) -> None:
            if not self._cudashim_exec:
                raise _refuse("Called NPUGraph::replay without a preceding successful capture.")
            super().replay()

        def reset(self) -> None:
            super().reset()
            self._cudashim_exec = False

        def pool(self) -> Any:
            if not self._cudashim_exec:
                raise _refuse("Called NPUGraph::pool() without a preceding successful capture.")
            return super().pool()

        def register_generator_state(self, generator: Any) -> None:
            import warnings

            warnings.warn("NPUGraph.register_generator_state() is deprecated, and will be removed in a future "
                          "torch_npu release. It is now a no-op and can be safely removed from your code. Generator "
                          "states are automatically registered when RNG ops first execute during graph capture.",
                          FutureWarning, stacklevel=2)

        def super_kernel_optimize(self, optimize_options: Any = None, debug_options: Any = None) -> None:
            if not self._cudashim_exec:
                raise _refuse("Called NPUGraph::super_kernel_optimize without a preceding successful capture.")

        def debug_dump(self, debug_path: str) -> None:
            """NPUGraph::debug_dump: CANN writes the captured model as its own JSON (aclmdlRIDebugJsonPrint),
            which the simulator cannot write; without a capture, torch_npu's warning."""
            if not self._cudashim_exec:
                import warnings

                warnings.warn("Called NPUGraph::debug_dump without a preceding successful capture.", stacklevel=2)
                return
            raise _NEEDS_CANN[0]("_C._NPUGraph.debug_dump", "CANN's JSON dump of a captured model (aclmdlRIDebugJsonPrint)")

    _NPUGraph.__module__, _NPUGraph.__qualname__ = "torch_npu._C", "_NPUGraph"
    return _NPUGraph


def _task_groups(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise CapabilityError(f"torch_npu._C.{name}: NPU graph task update (auto_dispatch_capture=True, "
                              "NPUGraph.update) is not simulated: capture without auto_dispatch_capture on the "
                              "simulated NPU [capability cuda_graphs]")

    refuse.__name__ = name
    return refuse


def refusing_synchronize(core: Any, sync: Any) -> Any:
    """torch.npu.synchronize, refused while any capture is open (aclrtSynchronizeDevice under capture)."""

    def synchronize(device: Any = None) -> None:
        try:
            core.capture_refuse_device("torch.npu.synchronize() (aclrtSynchronizeDevice)")
        except RuntimeError as exc:
            _refuse(str(exc))
            raise
        sync(device)

    synchronize.__doc__ = getattr(sync, "__doc__", None)
    return synchronize


def natives(torch: Any, core: Any) -> dict[str, Any]:
    """torch_npu._C's names the wheel's graphs.py imports -> their simulated values. Also gives the core
    the NPU's words for refusals inside a capture, and torch.compile's kernel calls their capture check."""
    from .. import graph_kernels

    core.set_capture_words(CAPTURE_WORDS["refused"], CAPTURE_WORDS["invalidated"])
    # CANN's stream capture refuses a synchronising call on the capturing stream and goes on capturing
    # (torch_npu's own tests rely on it): only the device's synchronisation invalidates the capture
    core.set_stream_refusal_invalidates(False)
    graph_kernels.set_capture_check(core.capture_underway)

    def graph_pool_handle() -> tuple[int, int]:
        return (0, next(_handles))  # MemPool::graph_pool_handle(true): (0, n), as a capture's own pools are (n, 0)

    def is_capturing() -> bool:
        return bool(core.capture_underway())

    def weak_ref_tensor(t: Any) -> Any:
        return t  # the core's graph holds what it recorded: a strong reference is as good here

    def scope(scope_name: Any = None) -> None:
        return None  # super kernel scopes group kernels for the NPU's scheduler: nothing to do here

    out: dict[str, Any] = {
        "_NPUStreamBase": torch.Stream,  # graphs.py installs dummy natives unless the runtime's stream type exists
        "_NPUGraph": _graph_class(torch, core),
        "_graph_pool_handle": graph_pool_handle,
        "_npu_isCurrentStreamCapturing": is_capturing,
        "_weak_ref_tensor": weak_ref_tensor,
        "_super_kernel_scope_begin": scope,
        "_super_kernel_scope_end": scope,
        "_npu_getLocalDevice": lambda: int(core.current_device()),
    }
    for name in ("_graph_task_group_begin", "_graph_task_group_end", "_graph_task_update_begin",
                 "_graph_task_update_end"):
        out[name] = _task_groups(name)
    return out
