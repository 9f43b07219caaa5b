"""Inductor's C++ kernels inside a CUDA graph capture on the emulated device.

The wrapper torch.compile generates for cuda tensors (compile.py) calls its C++ kernels as Python
callables over the tensors' data pointers, past the dispatcher where a capture records
(csrc/graphs/graph.cpp). While a capture is open, each such call goes through one operator instead,

    cudashim::graph_kernel(int handle, Tensor[] reads, Tensor(a!)[] writes) -> ()

whose handle names the kernel and where each argument goes (the scalar arguments are fixed at
capture, as a CUDA graph fixes a kernel's parameters). The device's boxed fallback records it like
any other call: run now only when it writes nothing but the capture's own memory, re-run at every
replay. Its CPU kernel (reached through the fallback, on CPU views of the same memory) calls the
C++ kernel. Outside a capture the generated code pays one check per kernel call, nothing more.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["set_capture_check", "capture_check", "launch", "kinds", "cache_key_pass"]

_SCHEMA = "graph_kernel(int handle, Tensor[] reads, Tensor(a!)[] writes) -> ()"
_kernels: list[tuple[Callable[..., Any], tuple[tuple[str, Any], ...]]] = []  # handle -> (kernel, layout)
_handles: dict[tuple[int, tuple[tuple[str, Any], ...]], int] = {}
_lib: list[Any] = []  # the torch.library fragment, defined at the first capture that needs it


def kinds(arg_types: Any, count: int) -> str:
    """One letter per kernel argument from Inductor's C++ argument types: 'w' for a pointer the
    kernel writes (out_ptr, in_out_ptr: not const), 'r' for a const pointer, 's' for a scalar.
    Unknown types: every tensor counts as written (a capture then never runs it early)."""
    if not arg_types or len(arg_types) != count:
        return "w" * count
    return "".join(("r" if t.strip().startswith("const") else "w") if t.strip().endswith("*") else "s"
                   for t in map(str, arg_types))


_capture_underway: list[Callable[[], bool]] = []  # the core's, set by graphs.bind at install


def set_capture_check(fn: Callable[[], bool]) -> None:
    _capture_underway[:] = [fn]


def capture_check() -> Callable[[], bool]:
    """What the generated wrapper asks before each C++ kernel call: is a capture open?"""
    return _capture_underway[0]


def _run(handle: int, reads: list[Any], writes: list[Any]) -> None:
    kernel, layout = _kernels[handle]
    kernel(*[reads[v] if k == "r" else writes[v] if k == "w" else v for k, v in layout])


def _op() -> Any:
    if not _lib:
        import torch

        lib = torch.library.Library("cudashim", "FRAGMENT")
        lib.define(_SCHEMA)
        lib.impl("graph_kernel", _run, "CPU")  # the device's fallback hands it CPU views of the memory
        _lib.append(lib)
    import torch

    return torch.ops.cudashim.graph_kernel.default


def launch(kernel: Callable[..., Any], kind: str, *args: Any) -> None:
    """A C++ kernel call inside a capture: through cudashim::graph_kernel, so the capture records it."""
    import torch

    reads: list[Any] = []
    writes: list[Any] = []
    layout = []
    for k, a in zip(kind, args):
        if isinstance(a, torch.Tensor):
            side = writes if k == "w" else reads
            layout.append(("w" if k == "w" else "r", len(side)))
            side.append(a)
        else:
            layout.append(("s", a))  # a size or a scalar: fixed in the graph, as CUDA fixes kernel parameters
    key = (id(kernel), tuple(layout))
    handle = _handles.get(key)
    if handle is None:
        handle = _handles[key] = len(_kernels)
        _kernels.append((kernel, key[1]))  # holds the kernel, so its id names no other
    _op()(handle, reads, writes)


def cache_key_pass(run: Callable[[Any], None] | None = None, source: str | None = None) -> Any:
    """A post-grad pass whose uuid is this code's: Inductor's FX graph cache keys on it, so a
    wrapper generated without these calls (an older cudashim's, or the alias backend's) is never
    loaded for the device, nor ours by them. The uuid also carries the thread count the C++ kernels
    specialize on, which Inductor adds to the key only for graphs with CPU tensors: code compiled
    under one thread count is never loaded under another, as for the CPU. `run`, if given, is the
    device's own rewrite of the graph (defined in the file `source`, which the uuid hashes too);
    else the pass changes nothing."""
    import os

    from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files

    here = os.path.dirname(os.path.abspath(__file__))

    class CacheKey(CustomGraphModulePass):
        def __call__(self, gm: Any) -> None:
            if run is not None:
                run(gm)

        def uuid(self) -> bytes:
            from torch._inductor import config
            from torch._inductor.utils import parallel_num_threads

            files = get_hash_for_files((os.path.join(here, "compile.py"), os.path.abspath(__file__),
                                        *((source,) if source else ())))
            # Inductor's own rule (FxGraphHashDetails): the kernels specialize on the thread count unless
            # it is fixed by config or left to the OpenMP runtime
            if config.cpp.threads < 1 and not config.cpp.dynamic_threads:
                return files + b"threads=%d" % parallel_num_threads()
            return files

    return CacheKey()
