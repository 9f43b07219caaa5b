"""torch.compile under `python -m cudashim run --platform cpu`: the compile cases (compile_cases.py)
and nano-vllm's compile pattern, in one shimmed interpreter.

Every CPU-written version runs first, eagerly, on plain torch (the device taken off); then every
CUDA-written version is compiled with fullgraph=True (a graph break raises) and
error_on_recompile=True on the emulated device, with and without the TorchFunctionMode that
torch.set_default_device("cuda") pushes (nano-vllm loads its model under it), called twice, and
compared with its twin. Prints one JSON object on its last line.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402  - the import hook installs the emulated device here
import torch._dynamo  # noqa: E402
from torch._dynamo.testing import CompileCounter  # noqa: E402

from cudashim import installers  # noqa: E402

CONTEXTS: dict[str, Callable[[], None]] = {
    "plain": lambda: torch.set_default_device(None),
    "set_default_device": lambda: torch.set_default_device("cuda"),
}


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"[-3000:]


def _diff(got: Any, want: Any, tol: float | None = None) -> str | None:
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            d = _diff(g, w, tol)
            if d:
                return d
        return None
    if not isinstance(got, torch.Tensor):
        return f"got {type(got).__name__}, want a tensor"
    # a CUDA-written result on the (emulated) device stands for its CPU twin's on the host
    kind = {"cuda": "host", "cpu": "host"}
    if (kind.get(got.device.type, got.device.type), got.dtype, got.shape) != \
            (kind.get(want.device.type, want.device.type), want.dtype, want.shape):
        return f"{got.device}/{got.dtype}/{tuple(got.shape)} vs {want.device}/{want.dtype}/{tuple(want.shape)}"
    got, want = got.cpu(), want.cpu()
    if tol is None:
        ok = torch.equal(got, want)
    else:
        ok = torch.allclose(got.double(), want.double(), atol=tol, rtol=tol)
    return None if ok else f"values differ: {got} vs {want}"


def _compiled_twice(fn: Callable[..., Any], inputs: Callable[[], tuple[Any, ...]], **kw: Any) -> tuple[Any, int]:
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(fn, backend=counter, **kw)
    compiled(*inputs())
    return compiled(*inputs()), counter.frame_count


def cases(expected: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from compile_cases import CASES

    out: dict[str, dict[str, Any]] = {}
    for ctx, enter in CONTEXTS.items():
        for case in CASES:
            key = f"{ctx}|{case.name}"
            enter()
            try:
                inputs = case.inputs
                if case.device_inputs:
                    inputs = lambda make=case.inputs: tuple(t.to("cuda") for t in make())  # noqa: E731
                got, frames = _compiled_twice(case.cuda, inputs, fullgraph=True)
                detail = _diff(got, expected[case.name]) or ("" if frames == 1 else f"{frames} frames compiled")
            except Exception as exc:  # fullgraph=True: a graph break lands here
                detail = _err(exc)
            finally:
                torch.set_default_device(None)
            out[key] = {"ok": not detail, "detail": detail}
    return out


def nano_vllm_pattern() -> dict[str, Any]:
    """nano-vllm: set_default_device("cuda") to load, back to "cpu", then @torch.compile (not
    fullgraph) functions calling .to(dtype). No warning, one frame, no recompilation."""
    from compile_cases import _half

    def norm(x: Any) -> Any:
        orig = x.dtype
        return (x.float() * 2).to(orig)

    torch.set_default_device("cuda")
    torch.set_default_device("cpu")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got, frames = _compiled_twice(norm, _half)
        return {"ok": True, "frames": frames, "warnings": [str(w.message)[:300] for w in caught],
                "dtype": str(got.dtype)}
    except Exception as exc:
        return {"ok": False, "detail": _err(exc)}
    finally:
        torch.set_default_device(None)


def inductor(expected: Any) -> dict[str, Any]:
    """One real Inductor compile of nano-vllm's RMSNorm under set_default_device("cuda")."""
    from compile_cases import _norm_inputs, rms_norm
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    torch.set_default_device("cuda")
    try:
        fn = torch.compile(lambda x, w: rms_norm(x, w, "cuda"), fullgraph=True)
        got, code = run_and_get_code(fn, *(t.to("cuda") for t in _norm_inputs()))
        src = "\n".join(code)
        return {"ok": True, "detail": _diff(got, expected, tol=1e-2) or "",
                "triton": "triton" in src.lower(), "cpp": "extern \"C\"" in src or "cpp_fused" in src}
    except Exception as exc:
        return {"ok": False, "detail": _err(exc)}
    finally:
        torch.set_default_device(None)


def _rotary(x: Any, cos: Any, sin: Any) -> Any:  # nano-vllm's rotary embedding: halves rotated, then cat
    x1, x2 = torch.chunk(x.float(), 2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


def wrapper_like_cpu() -> dict[str, Any]:
    """Inductor's code for cuda tensors is the CPU's: the same C++ kernels for a torch.cat (the CPU's
    lowering, not the GPU's unvectorizable pointwise cat), and buffers allocated without a Python
    torch call each (torch.empty_strided, under set_default_device's mode)."""
    import re

    from torch._inductor.utils import run_and_get_code

    kernels: dict[str, list[str]] = {}
    try:
        for dev in ("cpu", "cuda"):
            torch._dynamo.reset()
            args = tuple(t.to(dev) for t in (torch.randn(8, 2, 64).bfloat16(), torch.randn(8, 1, 32), torch.randn(8, 1, 32)))
            fn = torch.compile(_rotary, fullgraph=True)
            _, code = run_and_get_code(fn, *args)
            kernels[dev] = re.findall(r'extern "C".*?\}\s*\'\'\'', "\n".join(code), re.S)
        calls: list[int] = []
        real = torch.empty_strided
        torch.set_default_device("cuda")
        try:
            with torch._dynamo.config.patch(error_on_recompile=False):  # the mode on the stack: a new guard
                fn(*args)  # compiled under the mode (compiling allocates its own way)
            torch.empty_strided = lambda *a, **k: calls.append(1) or real(*a, **k)  # type: ignore[assignment]
            fn(*args)
        finally:
            torch.empty_strided = real  # type: ignore[assignment]
            torch.set_default_device(None)
        return {"ok": True, "kernels": len(kernels["cpu"]), "same_kernels": kernels["cpu"] == kernels["cuda"],
                "empty_strided_calls": len(calls)}
    except Exception as exc:
        return {"ok": False, "detail": _err(exc)}


def _plain_torch_compiles() -> str:
    """Factories and tensor methods compile with fullgraph=True ("" = yes): with the device on, and
    with it off (plain torch's own functions again)."""
    try:
        got, frames = _compiled_twice(lambda x: torch.zeros(4, device="cpu").to(x.dtype) + x.to("cpu"),
                                      lambda: (torch.ones(4),), fullgraph=True)
        return "" if torch.equal(got, torch.ones(4)) and frames == 1 else f"{got}, {frames} frames"
    except Exception as exc:
        return _err(exc)


def main() -> int:
    from compile_cases import CASES, _norm_inputs, rms_norm

    shim_was_on = installers.installed() == "cpu" and torch.cuda.is_available()
    # compiled once with the device on; then taken off and put back, as a program calling
    # deactivate()/activate() would
    warm = _plain_torch_compiles()
    installers.uninstall()
    expected = {c.name: c.cpu(*c.inputs()) for c in CASES}
    norm_expected = rms_norm(*_norm_inputs(), "cpu")
    installers.install("cpu")
    torch._dynamo.config.error_on_recompile = True
    result = {
        "shim_was_on": shim_was_on,
        "warm": warm,
        "cases": cases(expected),
        "nano_vllm": nano_vllm_pattern(),
        "inductor": inductor(norm_expected),
        "wrapper": wrapper_like_cpu(),
    }
    installers.uninstall()
    result["plain_after_uninstall"] = _plain_torch_compiles()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
