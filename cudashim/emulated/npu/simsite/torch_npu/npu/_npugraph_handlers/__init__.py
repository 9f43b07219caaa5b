"""torch_npu.npu._npugraph_handlers of the simulated torch_npu: the wheel's registry and its paged- and
fused-attention handlers (npugraph_handler.py, ifa_handler.py, simple_handler.py run as they are).

The real package also registers the FA v3 handlers (_fa3_graph_handler.py), which read the CANN
version; they are left out. A handler is used only with auto_dispatch_capture=True, whose graph-task
update the simulator refuses (cudashim/emulated/npu/graphs.py)."""
from .npugraph_handler import NpuGraphOpHandler, register_npu_graph_handler  # noqa: F401
from .ifa_handler import _IFAv1DefaultHandler, _IFAv2DefaultHandler  # noqa: F401
from .simple_handler import _SimpleGraphHandler  # noqa: F401
