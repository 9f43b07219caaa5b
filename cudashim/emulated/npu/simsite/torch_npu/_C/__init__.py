"""torch_npu._C of the simulated torch_npu: the native layer under the wheel's whole Python package.

The wheel's torch_npu/_C.cpython-*.so loads CANN and registers the NPU device; this package stands in
its place (cudashim/emulated/npu/site.py assembles the wheel's Python around it). Importing it does
what loading the native module does on a real host: the device (the emulated-device core serving
PrivateUse1, named npu) is started, torch_npu's operators are registered under torch.ops.npu, and
every name the wheel's Python calls is defined (cudashim/emulated/npu/natives.py). Nothing here talks
to an NPU.
"""
import sys as _sys
from pathlib import Path as _Path

import torch as _torch

from cudashim.emulated.npu import device as _device, natives as _natives

_device.install_cann_home(_Path(__file__).resolve().parent.parent.parent)
_core = _device.start(_torch)
_names = _natives.build(_torch, _core)
globals().update(_names)
_natives.register_operators(_torch, _core, _Path(__file__).resolve().parent.parent.parent)


def _readiness(torch):
    from cudashim import report

    if report.enabled():  # the Ascend readiness report: what a real torch_npu does with each operator run
        from cudashim.report import readiness

        readiness.install(torch)


_natives.AFTER_INIT.append(_readiness)
_natives.trace_if_asked(_sys.modules[__name__], set(_names))
