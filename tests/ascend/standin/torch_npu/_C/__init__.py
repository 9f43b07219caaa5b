"""Stand-in for torch_npu._C: the native classes transfer_to_npu and the graph classes touch."""

from __future__ import annotations

from typing import Any

from .. import RECORD, recorder
from . import _distributed_c10d  # noqa: F401

_npu_hostEmptyCache = recorder("_C._npu_hostEmptyCache")


class _NPUGraph:
    """The native graph base: records what reaches it; takes no constructor arguments (like the real one)."""

    def __new__(cls) -> Any:
        return super().__new__(cls)

    def __init__(self) -> None:
        RECORD.append(("_NPUGraph.__init__", (), {}))

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global", report_shape: bool = False) -> None:
        RECORD.append(("_NPUGraph.capture_begin", (), {"pool": pool, "capture_error_mode": capture_error_mode,
                                                       "report_shape": report_shape}))

    def capture_end(self) -> None:
        RECORD.append(("_NPUGraph.capture_end", (), {}))

    def replay(self) -> None:
        RECORD.append(("_NPUGraph.replay", (), {}))

    def reset(self) -> None:
        RECORD.append(("_NPUGraph.reset", (), {}))

    def pool(self) -> tuple[int, int]:
        return (0, 1)
