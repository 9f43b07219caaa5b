# Header of the stand-in torch_npu/npu/graphs.py; tests/ascend/_wheel.py appends the real NPUGraph and
# graph classes, extracted verbatim from the wheel's torch_npu/npu/graphs.py, below this header.
import gc  # noqa: F401
import logging
import typing  # noqa: F401

import torch  # noqa: F401

import torch_npu
import torch_npu._C

log = logging.getLogger("torch_npu.npu.graphs")
force_npugraph_gc = False


class _GraphDispatchMode:
    """Stand-in for the real TorchDispatchMode subclass (auto dispatch capture is not exercised)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

