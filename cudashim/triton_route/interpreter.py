"""A Triton launch on the emulated device, through Triton's own interpreter, in place.

Triton's interpreter (triton/runtime/interpreter.py) computes a kernel with numpy over the raw
addresses its pointer arguments hold. Stock, it first copies every argument's whole storage to the
host and back after the launch; on the emulated device the device's memory is host memory (a
tensor's data_ptr() is the host address of its bytes), so this executor hands the device tensors
over as they are and the kernel reads and writes the device's memory in place.

While a launch runs (and only then: a user's own TRITON_INTERPRET=1 run is stock Triton), three
gaps of the interpreter are closed, the same in every supported Triton:
  * a float scalar argument becomes an fp32 scalar, as the compiler's signature makes it (stock, it
    stays a Python float and `eps.to(tl.float32)` fails);
  * `triton.language.extra.libdevice` functions compute (stock, they are stubs returning None);
  * bf16 is computed in fp32 and rounded to nearest even, as the hardware does (stock, numpy works
    on bf16's raw bit patterns: bf16 + bf16 is integer addition, fp32 -> bf16 truncates).
Nested `@triton.jit` calls (JITFunction.__call__ inside a kernel) run interpreted too; inline
assembly raises CapabilityError naming the kernel.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from ..errors import CapabilityError
from . import _bf16, libdevice
from ._bf16 import from_f32 as f32_to_bf16, to_f32 as bf16_to_f32

__all__ = ["execute", "nested_call", "interpreting"]

_local = threading.local()  # the kernel being interpreted on this thread (None outside a launch)
# Triton's interpreter keeps the grid position in one builder and patches the language module while a
# launch runs: one launch at a time per process (a backward on autograd's thread waits for the forward's)
_one_at_a_time = threading.RLock()


def interpreting() -> Any:
    """The JITFunction whose launch is running on this thread, or None."""
    return getattr(_local, "kernel", None)


class _Scope:
    """Attributes set for one launch, restored in reverse order."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        if isinstance(owner, dict):
            self._saved.append((owner, name, owner.get(name), name in owner))
            owner[name] = value
        else:
            had = name in vars(owner) if hasattr(owner, "__dict__") else True
            self._saved.append((owner, name, getattr(owner, name, None), had))
            setattr(owner, name, value)

    def restore(self) -> None:
        while self._saved:
            owner, name, value, had = self._saved.pop()
            if isinstance(owner, dict):
                if had:
                    owner[name] = value
                else:
                    owner.pop(name, None)
            elif had:
                setattr(owner, name, value)
            else:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass


def _interp() -> Any:
    from triton.runtime import interpreter

    return interpreter


_is_bf16 = _bf16.is_bf16


def _close_gaps(scope: _Scope, kernel_name: str) -> None:
    """Patch the interpreter for the duration of a launch (bf16, float scalars, inline asm)."""
    import triton.language as tl

    m = _interp()
    b = m.interpreter_builder
    TensorHandle = m.TensorHandle
    cls = type(b)

    def binary_op(lhs: Any, rhs: Any, op: Callable[..., Any]) -> Any:
        if _is_bf16(lhs.dtype) and _is_bf16(rhs.dtype) and op not in _BITWISE:
            out = op(bf16_to_f32(lhs.data), bf16_to_f32(rhs.data))
            if out.dtype == np.bool_:
                return TensorHandle(out, lhs.dtype.scalar)
            return TensorHandle(f32_to_bf16(out), lhs.dtype.scalar)
        return cls.binary_op(b, lhs, rhs, op)

    def unary_op(arg: Any, op: Callable[..., Any]) -> Any:
        if _is_bf16(arg.dtype):
            return TensorHandle(f32_to_bf16(op(bf16_to_f32(arg.data))), arg.dtype.scalar)
        return cls.unary_op(b, arg, op)

    def cast_impl(src: Any, dst_type: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if _is_bf16(s) and _is_bf16(d):
            return TensorHandle(src.data, d)
        if _is_bf16(s):
            f = bf16_to_f32(src.data)
            return TensorHandle(f if d == tl.float32 else f.astype(m._get_np_dtype(d)), d)
        if _is_bf16(d):
            data = src.data.astype(np.float32, copy=False) if src.data.dtype != np.float64 else src.data
            if data.dtype == np.float64:  # fp64 -> bf16 rounds once, from the exact value
                data = _f64_to_f32_for_bf16(data)
            return TensorHandle(f32_to_bf16(data), d)
        return cls.cast_impl(b, src, dst_type)

    def create_fp_to_fp(src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if _is_bf16(src.dtype) or _is_bf16(dst_type):
            return cast_impl(src, dst_type)
        return cls.create_fp_to_fp(b, src, dst_type, rounding_mode)

    def create_fma(x: Any, y: Any, z: Any) -> Any:
        if _is_bf16(z.dtype):
            out = np.add(np.multiply(bf16_to_f32(x.data), bf16_to_f32(y.data), dtype=np.float64),
                         bf16_to_f32(z.data), dtype=np.float64).astype(np.float32)
            return TensorHandle(f32_to_bf16(out), z.dtype.scalar)
        return cls.create_fma(b, x, y, z)

    def create_dot(a: Any, bb: Any, d: Any, *rest: Any) -> Any:
        if _is_bf16(a.dtype) or _is_bf16(bb.dtype):
            a = TensorHandle(bf16_to_f32(a.data), tl.float32) if _is_bf16(a.dtype) else a
            bb = TensorHandle(bf16_to_f32(bb.data), tl.float32) if _is_bf16(bb.dtype) else bb
        return cls.create_dot(b, a, bb, d, *rest)

    def unary_bf16(name: str) -> Callable[..., Any]:
        original = getattr(cls, name)

        def fn(arg: Any) -> Any:
            if _is_bf16(arg.dtype):
                f = TensorHandle(bf16_to_f32(arg.data), tl.float32)
                return TensorHandle(f32_to_bf16(original(b, f).data), arg.dtype.scalar)
            return original(b, arg)

        return fn

    def ternary_op(lhs: Any, rhs: Any, other: Any, op: Callable[..., Any]) -> Any:
        if op is np.clip and _is_bf16(other.dtype):
            out = op(bf16_to_f32(lhs.data), bf16_to_f32(rhs.data), bf16_to_f32(other.data))
            return TensorHandle(f32_to_bf16(out), other.dtype.scalar)
        return cls.ternary_op(b, lhs, rhs, other, op)

    def inline_asm(*args: Any, **kwargs: Any) -> Any:
        raise CapabilityError(
            f"Triton kernel {kernel_name} uses inline assembly (tl.inline_asm_elementwise), which the emulated "
            "device cannot run [capability triton_kernels]; map the kernel's Python entry point to portable code "
            "in [tool.cudashim.patches]")

    for name, fn in (("binary_op", binary_op), ("unary_op", unary_op), ("cast_impl", cast_impl),
                     ("create_fp_to_fp", create_fp_to_fp), ("create_fma", create_fma), ("create_dot", create_dot),
                     ("ternary_op", ternary_op), ("create_inline_asm", inline_asm),
                     ("create_erf", unary_bf16("create_erf")), ("create_rsqrt", unary_bf16("create_rsqrt")),
                     ("create_fabs", unary_bf16("create_fabs"))):
        scope.set(b, name, fn)
    # the builder's create_* lambdas call self.binary_op / self.cast_impl: rebinding those covers them
    for name in ("create_si_to_fp", "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_fp_ext",
                 "create_fp_trunc"):
        scope.set(b, name, lambda src, dst_type: cast_impl(src, dst_type))
    scope.set(b, "create_int_cast", lambda src, dst_type, is_signed: cast_impl(src, dst_type))

    reduce_ops = m.ReduceOps
    min_max, total = reduce_ops.min_max, reduce_ops.sum

    def min_max_(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        x = input[0] if isinstance(input, tuple) else input
        if not _is_bf16(x.dtype):
            return min_max(self, input, val_reduce_op, idx_reduce_op)
        f = bf16_to_f32(x.handle.data)
        val = idx = None
        if val_reduce_op:
            val = self.to_tensor(f32_to_bf16(val_reduce_op(f, axis=self.axis, keepdims=self.keep_dims)), x.dtype)
        if idx_reduce_op:
            idx = self.to_tensor(idx_reduce_op(f, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        return (val, idx) if val is not None and idx is not None else (val if val is not None else idx)

    def sum_(self: Any, input: Any) -> Any:
        if not _is_bf16(input.dtype):
            return total(self, input)
        out = np.sum(bf16_to_f32(input.handle.data), axis=self.axis, keepdims=self.keep_dims, dtype=np.float32)
        return self.to_tensor(f32_to_bf16(out), input.dtype)

    scope.set(reduce_ops, "min_max", min_max_)
    scope.set(reduce_ops, "sum", sum_)

    implicit = m._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):  # the compiler's signature makes a Python float an fp32 scalar
            return tl.tensor(TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return implicit(arg)

    scope.set(m, "_implicit_cvt", implicit_cvt)


_BITWISE = (np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift)


def _f64_to_f32_for_bf16(data: Any) -> Any:
    # rounding fp64 -> fp32 -> bf16 could round twice; keeping the sticky bit in fp32's lowest bit
    # makes the second rounding see what the first dropped
    f32 = data.astype(np.float32)
    inexact = f32.astype(np.float64) != data
    bits = f32.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


_interpreted: dict[Any, Any] = {}  # python function -> InterpretedFunction (holds the rewritten source)
_transformer: list[Any] = []


def _loop_transformer() -> Any:
    """Triton's source rewrite for the interpreter, plus: the index of a `range`/`tl.range` loop is a
    tensor, as the compiler makes it (stock, it is a Python int and `i.to(tl.int64)` fails). The
    rewrite's own rule turns an assignment's value into a tensor; the loop body starts with `i = i`."""
    if not _transformer:
        import ast

        base = _interp().ASTTransformer

        class LoopIndex(base):  # type: ignore[misc, valid-type]
            def visit_For(self, node: Any) -> Any:
                node = self.generic_visit(node)
                it = node.iter
                name = getattr(it, "func", None)
                called = getattr(name, "id", None) or getattr(name, "attr", None)
                if called == "range" and isinstance(node.target, ast.Name):
                    me = node.target.id
                    keep = ast.Assign(targets=[ast.Name(id=me, ctx=ast.Store())], value=ast.Name(id=me, ctx=ast.Load()))
                    node.body.insert(0, ast.copy_location(self.visit_Assign(keep), node))
                return node

        _transformer.append(LoopIndex())
    return _transformer[0]


def _interpreted_fn(jit_fn: Any) -> Any:
    fn = jit_fn.fn
    interp = _interpreted.get(fn)
    if interp is None:
        interp = _interp().InterpretedFunction(fn)
        interp.rewriter.ast_transformer = _loop_transformer()
        # Triton caches rewrites per function for all interpreters: ours (with the loop index) apart
        interp.rewritten_fn = {}
        _interpreted[fn] = interp
    return interp


def _device_check(arg: Any, index: int, device_type: str) -> None:
    import torch

    t = arg.base if hasattr(arg, "base") and not isinstance(arg, torch.Tensor) else arg
    if isinstance(t, torch.Tensor) and t.device.type != device_type:
        # the words of Triton's own launcher for a host tensor given to a GPU kernel
        raise ValueError(f"Pointer argument (at {index}) cannot be accessed from Triton (cpu tensor?)")


_executor: list[type] = []


def _in_place() -> type:
    """Triton's GridExecutor without its host copy: the arguments are the device's memory already."""
    if not _executor:
        class InPlace(_interp().GridExecutor):  # type: ignore[misc, name-defined]
            def _init_args_hst(self, args_dev: Any, kw: Any) -> Any:
                return list(args_dev), dict(kw)

            def _restore_args_dev(self, *a: Any) -> None:
                return None

        _executor.append(InPlace)
    return _executor[0]


def execute(jit_fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: tuple[int, int, int],
            device_type: str | None = "cuda", copy: bool = False) -> None:
    """Run one launch of jit_fn on the interpreter, reading and writing the arguments' memory in place.
    device_type None: any tensor's memory is taken (a graph replay hands CPU views of device memory).
    copy: Triton's own executor instead, which copies each argument's storage to the host and back
    (benchmarks/bench_triton.py measures what the in-place launch saves)."""
    m = _interp()
    if device_type is not None:
        for i, a in enumerate(list(args) + list(kwargs.values())):
            _device_check(a, i, device_type)
    interp = _interpreted_fn(jit_fn)
    rewritten = interp.rewrite()
    name = _kernel_name(jit_fn)
    scope = _Scope()
    previous = interpreting()
    _one_at_a_time.acquire()
    _local.kernel = jit_fn
    try:
        _close_gaps(scope, name)
        libdevice.patch(scope, jit_fn.fn.__globals__, lambda: name)
        _patch_global_builtins(scope, jit_fn.fn.__globals__)
        executor = (m.GridExecutor if copy else _in_place())(rewritten, interp.arg_names, grid, [])
        executor(*args, **kwargs)
    except m.InterpreterError as e:
        if isinstance(e.__cause__, CapabilityError):
            raise e.__cause__ from None
        raise
    finally:
        scope.restore()
        _local.kernel = previous
        _one_at_a_time.release()


def nested_call(jit_fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A @triton.jit function called from inside a kernel being interpreted."""
    interp = _interpreted_fn(jit_fn)
    scope = _Scope()
    lang = _interp()._patch_lang(jit_fn.fn)
    try:
        libdevice.patch(scope, jit_fn.fn.__globals__, lambda: _kernel_name(jit_fn))
        _patch_global_builtins(scope, jit_fn.fn.__globals__)
        return interp.rewrite()(*args, **kwargs)
    finally:
        scope.restore()
        lang.restore()


def _patch_global_builtins(scope: _Scope, fn_globals: dict[str, Any]) -> None:
    """Triton builtins a kernel imported by name (`from triton.language.math import rsqrt`): stock, the
    interpreter binds builtins only as attributes of triton.language, so these raise for want of _semantic."""
    import triton.language as tl

    m = _interp()
    for key, value in list(fn_globals.items()):
        if (callable(value) and tl.core.is_builtin(value) and not isinstance(value, type)
                and str(getattr(value, "__module__", "")).startswith("triton.language")):
            def bound(*args: Any, _fn: Any = value, **kwargs: Any) -> Any:
                kwargs.pop("_semantic", None)
                return _fn(*args, _semantic=m.interpreter_semantic, **kwargs)

            scope.set(fn_globals, key, bound)


def _kernel_name(jit_fn: Any) -> str:
    fn = getattr(jit_fn, "fn", jit_fn)
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"

