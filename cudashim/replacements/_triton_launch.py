"""Launching our Triton kernels without the JIT's per-call work: an eager decode step is host-bound.

`kernel[grid](...)` binds every argument, derives a specialization from each value, builds a cache key
and looks the compiled kernel up before launching it: several times the host time of the compiled
kernel's own launcher, and more than the GPU work of a small-batch decode step's kernels. `FastLaunch` lets the JIT do that
work once per key, keeps the CompiledKernel it returns, and from then on calls that kernel's launcher
exactly as `JITFunction.run` does after its cache lookup.

The key is computed here from the arguments (not trusted to callers) and holds everything the JIT
specializes a compiled kernel on: each tensor's dtype (and all of them 16-byte aligned); for each int,
whether it is 1, whether it is a multiple of 16, and whether it fits int32; the type of every other
scalar; the constexpr values; the launch options; the current device. Anything else (a profiler's
launch hooks, an unaligned tensor, the interpreter, where `kernel[grid]` returns no compiled kernel)
takes the JIT's own path, which is always right.

Verified (L3) on an NVIDIA GPU by tests/gpu/test_replacements_gpu.py, which compares both paths bit for bit.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction

__all__ = ["FastLaunch"]

_I32 = 2 ** 31


class FastLaunch:
    """`FastLaunch(jit_fn, n_tensors)(grid, args, consts, **options)` == `jit_fn[grid](*args, **consts, **options)`.

    args: the runtime arguments in order, the first n_tensors of them tensors, the rest ints and floats;
    consts: the constexpr parameters that follow them, by name, in the kernel's parameter order;
    options: launch options (num_warps, num_stages).
    """

    def __init__(self, fn: Any, n_tensors: int) -> None:
        self._fn = fn
        # under TRITON_INTERPRET=1, @triton.jit gives an InterpretedFunction (which runs on CPU
        # tensors and also makes them report is_cuda): nothing to keep, always its own path
        self._jit = isinstance(fn, JITFunction)
        self._n = n_tensors
        self._compiled: dict[tuple, Any] = {}
        self.fast_launches = 0  # tests read it: the fast path really ran

    def _key(self, args: Sequence[Any], consts: dict[str, Any], options: dict[str, Any]) -> tuple | None:
        """None: let the JIT decide (the interpreter, or an unaligned tensor — never one torch
        allocated, but a view can be)."""
        if not self._jit:
            return None
        tensors = args[: self._n]
        ptrs = 0
        for t in tensors:
            ptrs |= t.data_ptr()
        if ptrs & 15:
            return None
        return (
            driver.active.get_current_device(),
            *[t.dtype for t in tensors],
            # ints: what the JIT reads off them (1 becomes a constant, multiples of 16 are marked, and
            # the width); floats and anything else: the type only (never specialized on value)
            *[(x == 1, x % 16 == 0, -_I32 <= x < _I32) if type(x) is int else type(x) for x in args[self._n:]],
            *consts.values(),
            *options.items(),
        )

    def __call__(self, grid: tuple[int, int, int], args: Sequence[Any], consts: dict[str, Any], **options: Any) -> None:
        key = self._key(args, consts, options)
        compiled = self._compiled.get(key) if key is not None else None
        if compiled is not None and _no_hook(_HOOKS.launch_enter_hook) and _no_hook(_HOOKS.launch_exit_hook):
            stream = driver.active.get_current_stream(key[0])
            try:
                # the arguments JITFunction.run hands the launcher: all of them since Triton 3.3, the
                # non-constexpr ones before
                compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, None,
                             None, None, *args, *(consts.values() if _ALL_ARGS else ()))
            except TypeError:
                # a launcher that takes its arguments some other way (it checks them before launching):
                # this kernel keeps the JIT's path from now on, which is always right
                self._jit = False
                self._compiled.clear()
            else:
                self.fast_launches += 1
                return
        got = self._fn[grid](*args, **consts, **options)
        # a CompiledKernel with its handles loaded (the launch above loaded them); the interpreter
        # returns None, and a Triton without this launcher shape keeps the JIT path for good
        if key is not None and getattr(got, "function", None) is not None and hasattr(got, "packed_metadata"):
            self._compiled[key] = got


_ALL_ARGS = tuple(int(x) for x in triton.__version__.split(".")[:2] if x.isdigit()) >= (3, 3)

try:  # where the JIT reads its launch hooks: triton.knobs (3.4+), else class attributes
    _HOOKS: Any = triton.knobs.runtime
except AttributeError:  # pragma: no cover - older Triton
    from triton.compiler import CompiledKernel as _HOOKS


def _no_hook(hook: Any) -> bool:
    """No launch hook installed (a profiler such as proton adds them; the JIT path calls them). Newer
    Triton keeps each hook as a HookChain, never None: off is an empty chain."""
    return hook is None or getattr(hook, "calls", None) == []
