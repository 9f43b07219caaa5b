"""torch_npu._C of the simulated torch_npu: the few natives the real Python files call at import."""
from . import _distributed_c10d  # noqa: F401


def _npu_hostEmptyCache():
    return None  # pinned host memory is returned as it is freed: nothing is cached
