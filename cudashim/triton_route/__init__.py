"""The Triton route: where Triton launches go on the cpu platform and the simulated NPU.

install(platform) (called by the installers once torch is imported) binds, when Triton loads:
  * JITFunction.run -> launch.launch: every `kernel[grid](...)`, autotuned or not, through one seam,
    computed by Triton's interpreter on the device's memory in place (interpreter.py);
  * JITFunction.__call__ -> a nested @triton.jit call inside an interpreted kernel runs interpreted;
  * triton.runtime.driver.active -> the emulated device's driver (driver.py);
and, once torch._dynamo loads, makes the launch a graph break for torch.compile (Dynamo never traces
the interpreter). `@triton.jit` still returns a JITFunction. A user who set TRITON_INTERPRET=1 asked
for stock Triton's interpreter: nothing is bound then. On nvidia nothing here is installed.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..importhook import when_imported
from . import launch as _launch
from .launch import add_executor, add_launch_check, remove_executor, remove_launch_check

__all__ = ["install", "uninstall", "installed", "add_launch_check", "remove_launch_check", "add_executor",
           "remove_executor", "stats", "PLATFORMS"]

# platform -> (torch device type of the emulated device, Triton target backend)
PLATFORMS = {"cpu": ("cuda", "cuda"), "ascend": ("npu", "npu")}

_installed: str | None = None
_saved: list[tuple[Any, str, Any]] = []  # (owner, attribute, original) to put back, in order
_driver_saved: list[Any] = []


def installed() -> str | None:
    return _installed


def stats() -> list[dict[str, Any]]:
    return _launch.stats()


def _user_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on", "yes")


def _set(owner: Any, name: str, value: Any) -> None:
    _saved.append((owner, name, vars(owner).get(name, _MISSING)))
    setattr(owner, name, value)


_MISSING = object()


def _run(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return _launch.launch(self, args, kwargs, grid, warmup)

    run.__wrapped__ = original  # type: ignore[attr-defined]
    run.__qualname__ = "JITFunction.run"
    return run


def _call(original: Callable[..., Any]) -> Callable[..., Any]:
    from .interpreter import interpreting, nested_call

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if interpreting() is None:
            return original(self, *args, **kwargs)  # outside a kernel: Triton's own error
        return nested_call(self, args, kwargs)

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def _on_jit(mod: Any) -> None:
    cls = getattr(mod, "JITFunction", None)
    if _installed is None or cls is None or cls.__dict__.get("run") is None:
        return
    _set(cls, "run", _run(cls.__dict__["run"]))
    _set(cls, "__call__", _call(cls.__dict__["__call__"]))
    # torch._dynamo's decorators, not torch._dynamo: importing torch._dynamo imports Triton (through
    # torch.utils._triton) before it defines disable(), so its own callback would come too early
    when_imported("torch._dynamo.decorators", _on_dynamo)


def _on_dynamo(dynamo: Any) -> None:
    """A launch is a graph break: Dynamo runs it as Python, never tracing into the interpreter."""
    if _installed is None or not hasattr(dynamo, "disable"):
        return
    import triton.runtime.jit as jit

    cls = jit.JITFunction
    current = cls.__dict__.get("run")
    if current is None or getattr(current, "_cudashim_disabled", False):
        return
    disabled = dynamo.disable(current, recursive=True)
    disabled._cudashim_disabled = True  # type: ignore[attr-defined]
    _set(cls, "run", disabled)


def _on_driver(mod: Any) -> None:
    holder = getattr(mod, "driver", None)
    if _installed is None or holder is None or not hasattr(holder, "set_active"):
        return
    from .driver import EmulatedDriver

    device_type, backend = PLATFORMS[_installed]
    _driver_saved[:] = [holder, getattr(holder, "_active", None)]
    holder.set_active(EmulatedDriver(device_type, backend))


def _capture_check(platform: str) -> Callable[[], bool]:
    # both emulated devices (cuda on cpu, the simulated npu) give the graph recorder's capture check here
    from ..emulated import graph_kernels

    def capturing() -> bool:
        try:
            return bool(graph_kernels.capture_check()())
        except IndexError:  # the device's graphs not bound: nothing can be capturing
            return False

    return capturing


def install(platform: str) -> None:
    """Route Triton launches to the emulated device of `platform` ("cpu", or "ascend" simulated). Idempotent."""
    global _installed
    if _installed == platform or _user_interpret():
        return
    if platform not in PLATFORMS:
        raise ValueError(f"the Triton route serves {sorted(PLATFORMS)}, not {platform!r}")
    if _installed is not None:
        uninstall()
    _installed = platform
    _launch.configure(platform, PLATFORMS[platform][0], _capture_check(platform))
    add_executor("batched", _batched)  # all program instances at once; the interpreter takes what it declines
    when_imported("triton.runtime.jit", _on_jit)
    when_imported("triton.runtime.driver", _on_driver)
    _report_section()


def _batched(kernel: Any, bound: dict[str, Any], grid: tuple[int, int, int]) -> str | None:
    from . import batched  # numpy and Triton's interpreter: loaded at the first launch, not at start-up

    return batched.execute(kernel, bound, grid)


def uninstall() -> None:
    global _installed
    while _saved:
        owner, name, value = _saved.pop()
        if value is _MISSING:
            try:
                delattr(owner, name)
            except AttributeError:
                pass
        else:
            setattr(owner, name, value)
    if _driver_saved:
        holder, active = _driver_saved
        holder._active = active
        _driver_saved.clear()
    _installed = None


def _report_section() -> None:
    from .. import report

    if report.enabled():
        report.add_section("triton_kernels", stats, _summary)


def _summary(kernels: list[dict[str, Any]]) -> str | None:
    if not kernels:
        return None
    launches = sum(k["launches"] + k["replayed"] for k in kernels)
    recorded = sum(k["recorded"] for k in kernels)
    graphs = f" ({recorded} recorded in CUDA graphs)" if recorded else ""
    from .driver import BENCHMARK_RULE, benchmarked

    tuned = f"; {BENCHMARK_RULE}" if benchmarked() else ""
    return (f"triton: {len(kernels)} kernel(s), {launches} launch(es) interpreted on the device{graphs}; "
            f"triton_kernels in the report lists each with a patch-map line for speed{tuned}")


from .._state import on_reset  # noqa: E402

on_reset(uninstall)
