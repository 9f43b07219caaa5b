"""The NPU operators of cudashim/emulated/npu/ops.py as the simulated torch_npu exposes them.

ops.py computes on CPU tensors, creating its intermediates on the default device. A program on the
simulated NPU often runs under `torch.set_default_device("npu")` (nano-vllm does, through
transfer_to_npu), and hands npu tensors. So each operator runs on CPU views of its npu arguments
(the same memory, no copy) with the CPU as the default device, and its tensor results are moved to
the device of the first npu argument, as the real operator returns them on the NPU.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["exposed_operators"]


def exposed_operators(torch: Any, core: Any, operators: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    Tensor = torch.Tensor

    def to_host(x: Any, found: list[Any]) -> Any:
        if isinstance(x, Tensor) and x.device.type == "npu":
            found.append(x.device)
            return core.cpu_view(x)
        if isinstance(x, (list, tuple)):
            return type(x)(to_host(v, found) for v in x)
        return x

    def to_device(x: Any, dev: Any) -> Any:
        if isinstance(x, Tensor) and x.device.type == "cpu":
            return x.to(dev)
        if isinstance(x, (list, tuple)):
            return type(x)(to_device(v, dev) for v in x)
        return x

    def exposed(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            found: list[Any] = []
            args = to_host(args, found)
            kwargs = {k: to_host(v, found) for k, v in kwargs.items()}
            with torch.device("cpu"):
                out = fn(*args, **kwargs)
            return to_device(out, found[0]) if found else out
        return call

    return {name: exposed(fn) for name, fn in operators.items()}
