"""torch.cuda.nvtx where no NVTX library is loaded: markers that mark nothing, NVTX's answers kept.

torch's NVTX bindings exist only in a CUDA build of torch; a CPU build (what torch_npu and the CPU
run on) raises "NVTX functions not installed" at the first marker. Profiler annotations have no
receiver there, so each marker is a no-op; range_push/range_pop still answer the nesting depth as
NVTX does (the zero-based depth of the range started or ended; -1 when none is open).
"""

from __future__ import annotations

from typing import Any

__all__ = ["nvtx_table"]


class _NvtxRange:
    """torch.cuda.nvtx.range(msg): a context manager and decorator that marks nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __call__(self, fn: Any) -> Any:
        return fn


def nvtx_table() -> dict[str, Any]:
    """torch.cuda.nvtx names -> no-op markers (one depth counter per table)."""
    depth = [0]

    def range_push(msg: str) -> int:
        depth[0] += 1
        return depth[0] - 1

    def range_pop() -> int:
        if depth[0] == 0:
            return -1
        depth[0] -= 1
        return depth[0]

    return {"range_push": range_push, "range_pop": range_pop, "range_start": lambda msg: 0,
            "range_end": lambda range_id: None, "mark": lambda msg: None, "range": _NvtxRange}
