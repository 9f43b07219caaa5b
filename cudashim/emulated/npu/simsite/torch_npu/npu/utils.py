"""torch_npu.npu.utils of the simulated torch_npu: what the wheel's graphs.py imports from it.

The real module reads the NPU runtime (SoC version, CANN version, dump settings) on import."""

__all__ = []


def _dummy_type(name):
    """A class that cannot be instantiated (torch_npu's stand-in for natives a build lacks)."""

    def init_err(self):
        raise RuntimeError(f"Tried to instantiate dummy base class {self.__class__.__name__}")

    return type(name, (object,), {"__init__": init_err})
