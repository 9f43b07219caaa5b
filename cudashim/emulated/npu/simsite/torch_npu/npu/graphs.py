"""torch_npu.npu.graphs of the simulated torch_npu: NPU graphs are not simulated.

Capturing would need the runtime to record and replay kernels; the simulator runs each operator when
it is issued. Creating the objects works (engines build them up front); capture raises, naming the
fix: run eagerly (enforce_eager / no graph capture) on the simulated NPU.
"""
from cudashim.errors import CapabilityError

__all__ = ["NPUGraph", "graph", "make_graphed_callables"]

_WHY = ("NPU graph capture is not simulated (the simulated NPU runs each operator when issued); "
        "run eagerly on the simulated NPU (e.g. enforce_eager=True) [capability cuda_graphs]")


class NPUGraph:
    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def capture_begin(self, *args, **kwargs):
        raise CapabilityError(_WHY)

    def replay(self):
        raise CapabilityError(_WHY)

    def reset(self):
        return None


class graph:
    def __init__(self, npu_graph, pool=None, stream=None, auto_dispatch_capture=False, capture_error_mode="global"):
        self.npu_graph = npu_graph

    def __enter__(self):
        raise CapabilityError(_WHY)

    def __exit__(self, *exc):
        return False


def make_graphed_callables(*args, **kwargs):
    raise CapabilityError(_WHY)
