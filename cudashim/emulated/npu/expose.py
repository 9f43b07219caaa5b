"""The NPU operators of cudashim/emulated/npu/ops.py as the simulated torch_npu exposes them.

ops.py computes on CPU tensors, creating its intermediates on the default device. A program on the
simulated NPU often runs under `torch.set_default_device("npu")` (nano-vllm does, through
transfer_to_npu), and hands npu tensors. So each operator runs on CPU views of its npu arguments
(the same memory, no copy) with the CPU as the default device, and its tensor results are moved to
the device of the first npu argument, as the real operator returns them on the NPU.

Inside an NPU graph capture an operator is one task of the graph, as on the NPU: it goes through the
core's recordable operator (graph_kernels.launch) with its npu tensors as inputs and outputs
allocated on the device, so every replay runs it again on what those tensors hold then. Its other
arguments (int lists such as actual_seq_lengths_kv, scalars) are fixed at capture, as the NPU fixes
a captured task's host parameters (torch_npu updates them only through NPUGraph.update).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["exposed_operators"]


def exposed_operators(torch: Any, core: Any, operators: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    from .. import graph_kernels

    Tensor = torch.Tensor

    def capturing() -> bool:
        try:
            check = graph_kernels.capture_check()
        except IndexError:  # no graph machinery installed (the operators used outside the simulated torch_npu)
            return False
        return bool(check())

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

    def tensors(x: Any, out: list[Any]) -> None:
        if isinstance(x, Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            for v in x:
                tensors(v, out)
        elif isinstance(x, dict):
            for v in x.values():
                tensors(v, out)

    def swap(x: Any, new: Any) -> Any:
        """x with its tensors replaced, in order, by next(new)."""
        if isinstance(x, Tensor):
            return next(new)
        if isinstance(x, (list, tuple)):
            return type(x)(swap(v, new) for v in x)
        if isinstance(x, dict):
            return {k: swap(v, new) for k, v in x.items()}
        return x

    def captured(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """fn as one recorded task: run now on the capture's inputs (its outputs get their shapes and
        the values eager execution gives), re-run at every replay into the same outputs."""
        found: list[Any] = []
        with torch.device("cpu"):
            shape_run = fn(*to_host(args, found), **{k: to_host(v, found) for k, v in kwargs.items()})
        results: list[Any] = []
        tensors(shape_run, results)
        dev = found[0]
        outs = [torch.empty(r.shape, dtype=r.dtype, device=dev) for r in results]
        inputs: list[Any] = []
        tensors((args, kwargs), inputs)

        def task(*views: Any) -> None:  # CPU views: the inputs, then the outputs
            given = iter(views[:len(inputs)])
            a, kw = swap((args, kwargs), given)
            with torch.device("cpu"):
                got: list[Any] = []
                tensors(fn(*a, **kw), got)
            for dst, src in zip(views[len(inputs):], got):
                dst.copy_(src)

        graph_kernels.launch(task, "r" * len(inputs) + "w" * len(outs), *inputs, *outs)
        return swap(shape_run, iter(outs))

    def exposed(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if capturing():
                return captured(fn, args, kwargs)
            found: list[Any] = []
            args = to_host(args, found)
            kwargs = {k: to_host(v, found) for k, v in kwargs.items()}
            with torch.device("cpu"):
                out = fn(*args, **kwargs)
            return to_device(out, found[0]) if found else out
        return call

    return {name: exposed(fn) for name, fn in operators.items()}
