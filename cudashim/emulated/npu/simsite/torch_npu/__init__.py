"""The simulated torch_npu (cudashim): stands in for the wheel's torch_npu/__init__.py.

The real one loads torch_npu._C (CANN, the NPU runtime) and registers the NPU device. Here the
emulated-device core serving PrivateUse1 is that device (cudashim/emulated/npu/device.py); the
Python files of the torch-npu 2.13.0 wheel that run over it are copied beside this file at run time
(cudashim/emulated/npu/site.py, REAL_FILES). Nothing here talks to an NPU.
"""
import torch

from cudashim.emulated.npu import device as _device

_core = _device.start(torch)

from . import _C, npu, profiler, utils  # noqa: E402

torch._register_device_module("npu", npu)
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True,
                                                     for_packed_sequence=True)

from cudashim.emulated.npu import compile as _compile, hccl as _hccl, expose as _expose, ops as _ops  # noqa: E402

globals().update(_expose.exposed_operators(torch, _core, _ops.OPERATORS))
_hccl.register(torch, _core)
_compile.register(torch)  # stands in for torch_npu's Inductor backend (torch_npu/_inductor)

from cudashim import report as _report  # noqa: E402

if _report.enabled():  # the Ascend readiness report: what a real torch_npu does with each operator run
    from cudashim.report import readiness as _readiness

    _readiness.install(torch)

from cudashim._torch_compat import torch_npu_release as _release  # noqa: E402

__version__ = _release(torch.__version__)  # the release whose Python files run here (site.py chose it)
SIMULATED = True  # cudashim's mark: this is not the wheel's native torch_npu
