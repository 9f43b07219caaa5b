"""torch.cuda's graph API over the emulated device's recorder (csrc/graphs/graph.cpp).

The core registers its graph as the CUDA device type's at::GraphImplInterface, so
torch.accelerator.Graph works as torch ships it; torch.cuda.CUDAGraph is the same C++ object under
torch.cuda's names and arguments. torch.cuda.graph and make_graphed_callables are torch's own code,
unchanged: they find CUDAGraph and graph_pool_handle in torch.cuda.graphs, bound here.

Choices, where CUDA leaves a choice or the host differs:
  * capture runs no in-place or out= work and no copy (a program sees none of it until replay);
    functional operators run once so their outputs exist: their contents are defined after replay.
  * capture belongs to a stream, as on CUDA: calls on the capture's stream (and streams that joined it)
    are recorded, from any thread (the autograd engine's device thread works on the forward's stream);
    other threads' work on their own streams runs. capture_error_mode decides where a synchronizing
    call is refused (csrc/graphs/graph.cpp).
  * a capture allocates to its graph's private pool (csrc/graphs/pools.cpp): a block the program
    frees stays reserved, not allocated, while the pool has a graph, as on CUDA, and is not handed
    out again — not even to the same pool (more memory than CUDA; never a wrong result). Under a
    device profile the statistics are CUDA's all the same: the allocator model serves the same
    requests from its pool of the same id, which takes back a block the program frees
    (csrc/runtime/cache_model.cpp).
  * the device's default generators are graph-safe: each replay draws new numbers.
  * torch.compile's C++ kernels are called from Python, past the dispatcher: under capture they go
    through a recordable operator (graph_kernels.py), so replay re-runs them too.
"""

from __future__ import annotations

import itertools
from typing import Any

from .. import _torch_compat
from ..errors import CapabilityError
from . import graph_kernels, graph_trees

__all__ = ["bind"]

_MODES = ("default", "global", "thread_local", "relaxed")
_handles = itertools.count(1)


def _graph_class(torch: Any, core: Any) -> type:
    base = torch._C._acceleratorGraph

    class CUDAGraph(base):  # type: ignore[misc, valid-type]
        """torch.cuda.CUDAGraph on the emulated device: capture records, replay re-runs (csrc/graphs/graph.cpp)."""

        def __new__(cls, keep_graph: bool = False) -> Any:
            return super().__new__(cls, keep_graph)

        def __init__(self, keep_graph: bool = False) -> None:
            super().__init__(bool(keep_graph))
            self._keep_graph = bool(keep_graph)

        def capture_begin(self, pool: Any = None, capture_error_mode: str = "global",
                          check_input_liveness: bool = False) -> None:
            if capture_error_mode not in _MODES:
                raise RuntimeError(f"Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, "
                                   f"got {capture_error_mode}")
            super().capture_begin(pool=None if pool is None else tuple(pool), capture_error_mode=capture_error_mode)

        def register_generator_state(self, generator: Any) -> None:
            """Make a generator graph-safe for this capture (the default ones already are)."""
            core.register_generator(generator)

        def raw_cuda_graph(self) -> int:
            raise CapabilityError("torch.cuda.CUDAGraph.raw_cuda_graph: the emulated device records calls, not a "
                                  "cudaGraph_t; replay() the graph instead [capability cuda_graph_keep_graph]")

        def raw_cuda_graph_exec(self) -> int:
            raise CapabilityError("torch.cuda.CUDAGraph.raw_cuda_graph_exec: the emulated device has no "
                                  "cudaGraphExec_t; replay() the graph instead [capability cuda_graph_keep_graph]")

    CUDAGraph.__module__ = "torch.cuda.graphs"
    return CUDAGraph


def graph_pool_handle() -> tuple[int, int]:
    """A new pool id: (0, n), as CUDA's handles are (graph-owned pools are (n, 0))."""
    return (0, next(_handles))


def bind(bindings: Any, torch: Any, core: Any) -> None:
    """Bind torch.cuda's graph names (and torch.cuda.graphs', read by torch.cuda.graph and
    make_graphed_callables) to the emulated device's graphs."""
    import torch.cuda.graphs as tgraphs

    cls = _graph_class(torch, core)
    capturing = core.capture_underway
    graph_kernels.set_capture_check(capturing)  # asked by torch.compile's kernel calls (compile.py)
    sync = torch.cuda.synchronize

    def synchronize(device: Any = None) -> None:
        core.capture_refuse_device("torch.cuda.synchronize()")  # cudaDeviceSynchronize fails while any capture is open
        sync(device)

    def is_current_stream_capturing() -> bool:
        return bool(capturing())

    table = {"CUDAGraph": cls, "graph_pool_handle": graph_pool_handle,
             "is_current_stream_capturing": is_current_stream_capturing,
             "synchronize": synchronize, "graph": tgraphs.graph, "make_graphed_callables": tgraphs.make_graphed_callables}
    for name, value in table.items():
        bindings.bind(torch.cuda, name, value, f"torch.cuda.{name}", "emulated")
    for name in ("CUDAGraph", "graph_pool_handle", "is_current_stream_capturing"):
        bindings.bind(tgraphs, name, table[name])
    graph_trees.bind(bindings, torch, core)  # Inductor's CUDA graph trees (mode="reduce-overhead")
    if _torch_compat.binds_over_cuda_entry(torch, "_host_emptyCache"):  # torch.cuda.graph's __enter__ calls it
        bindings.bind(torch._C, "_host_emptyCache", lambda: None)
