"""All program instances of a Triton launch at once: Triton's interpreter, with a leading instance axis.

Triton's interpreter runs a kernel's Python body once per program instance, and its cost is that Python,
not the data. Instances of one launch differ only through `program_id` (and what they load with it), so
this module runs the same body once for a whole group of instances: every value carries a leading axis,
one row per instance (size 1 where the value is the same for all, so numpy broadcasting does the rest).
The element operations are the interpreter's own (its builder does them), so a result is the one the
interpreter computes, bit for bit; only the shape-bearing operations (program ids, ranges, splats,
broadcasts, reshapes, reductions and scans, dots, loads and stores) are rewritten here for the extra axis.

Where instances would take different paths the run cannot be one group:
- Python control flow on a value that differs between instances (`if pid < n`, `for i in range(x)`
  with a loaded bound) stops the group at that decision; what the group stored so far is undone from
  a log, and the instances are split by the decision and run again, each part as its own group. A
  launch that splits into too many groups goes to the exact interpreter ("divergent control flow").
- Atomics between instances are ordered in the interpreter and cannot be batched: exact interpreter.
- An operation this module does not know (prints, histograms, tensor descriptors, inline asm...):
  exact interpreter, named in the reason.

`run_batched` returns None when it ran the launch, or the reason it did not, having left memory as it
found it; the caller then runs the exact interpreter.
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["run_batched", "run_interpreter", "BatchedFallback", "fallback_reason_cached"]

# Elements of one value, summed over the instances of a group: the group size adapts to keep values
# about this large, so a launch of many programs does not build one enormous array.
_GROUP_ELEMENTS = 1 << 22
# Instances in the first group of a launch, before the kernel's block sizes are known.
_FIRST_GROUP = 64
# A launch whose instances split into more groups than this goes to the exact interpreter: past it the
# repeated prefix work of each group costs more than the batching saves.
_MAX_GROUPS = 16

_LOCK = threading.RLock()


class BatchedFallback(Exception):
    """The launch cannot be batched; `reason` says why (the exact interpreter runs it instead)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Diverged(Exception):
    """Instances of the group disagree on a Python-level decision; `keys` has one entry per instance."""

    def __init__(self, keys: np.ndarray, where: str) -> None:
        super().__init__(where)
        self.keys = keys
        self.where = where


def _interp() -> Any:
    from triton.runtime import interpreter

    return interpreter


@dataclass
class _Group:
    """The instances run together: their grid coordinates, in the interpreter's order."""

    coords: np.ndarray  # (n, 3) int32
    grid: tuple[int, int, int]

    @property
    def size(self) -> int:
        return int(self.coords.shape[0])


@dataclass
class _Run:
    """State of one launch: the group being run, the undo log of its stores, what it has seen."""

    group: _Group
    launch_instances: int
    undo: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    max_elements: int = 1


# Builder methods that act element by element on their operands' data: the interpreter's own
# implementation is used unchanged (operands are first brought to the same rank).
_ELEMENTWISE = frozenset("""
get_half_ty get_bf16_ty get_float_ty get_double_ty get_int1_ty get_int8_ty get_uint8_ty get_int16_ty
get_uint16_ty get_int32_ty get_uint32_ty get_int64_ty get_uint64_ty get_fp8e4nv_ty get_fp8e4b15_ty
get_fp8e4b8_ty get_fp8e5_ty get_fp8e5b16_ty get_ptr_ty get_block_ty get_void_ty
get_int1 get_uint8 get_int8 get_uint16 get_int16 get_uint32 get_int32 get_uint64 get_int64 get_fp16 get_bf16
get_fp32 get_fp64 get_null_value get_all_ones_value get_cache_policy
cast_impl create_si_to_fp create_ui_to_fp create_fp_to_si create_fp_to_ui create_fp_ext create_fp_trunc
create_int_cast create_fp_to_fp create_bitcast binary_op
create_fadd create_fmul create_fdiv create_frem create_fsub create_fneg create_mul create_precise_divf
create_approx_divf create_sdiv create_udiv create_srem create_urem create_add create_sub create_shl create_lshr
create_minsi create_minui create_minimumf create_minnumf create_maxsi create_maxui create_maximumf create_maxnumf
create_icmpSLE create_icmpSLT create_icmpSGE create_icmpSGT create_icmpULE create_icmpULT create_icmpUGE
create_icmpUGT create_icmpEQ create_icmpNE create_fcmpOLT create_fcmpOGT create_fcmpOLE create_fcmpOGE
create_fcmpOEQ create_fcmpONE create_fcmpULT create_fcmpUGT create_fcmpULE create_fcmpUGE create_fcmpUEQ
create_fcmpUNE create_and create_xor create_or create_int_to_ptr create_ptr_to_int create_idiv create_ashr
create_umulhi ternary_op create_clampf create_select create_fma unary_op create_fabs create_cos create_exp
create_exp2 create_iabs create_floor create_ceil create_log create_log2 create_precise_sqrt create_sqrt create_sin
create_erf create_rsqrt create_addptr create_split create_barrier create_assert create_assume
""".split())

# Operations that order instances against each other: only a launch of one instance may run them here.
_ATOMICS = frozenset("create_atomic_cas create_atomic_rmw create_atomic_load create_atomic_store "
                     "create_atomic_poll".split())

# Attributes the language front end reads from a builder without calling it.
_PLAIN_ATTRS = frozenset("options codegen_fns arch".split())


def _align(handles: list[Any]) -> list[Any]:
    """Give every operand the same rank: a per-instance scalar (n,) becomes (n, 1, ...)."""
    TensorHandle = _interp().TensorHandle
    ndims = [h.data.ndim for h in handles if isinstance(h, TensorHandle)]
    if not ndims or min(ndims) == max(ndims):
        return handles
    top = max(ndims)
    out = []
    for h in handles:
        if isinstance(h, TensorHandle) and h.data.ndim < top:
            h = TensorHandle(h.data.reshape(h.data.shape + (1,) * (top - h.data.ndim)), h.dtype, h.attr)
        out.append(h)
    return out


class BatchedBuilder:
    """The interpreter's builder, for values that carry a leading instance axis.

    A scalar of the kernel is an array (n,) and a block of shape S an array (n, *S), where n is the
    number of instances of the group or 1 when the value is the same for all of them.
    """

    def __init__(self, base: Any) -> None:
        self._base = base
        self.run: _Run | None = None

    def __getattr__(self, name: str) -> Any:
        if name in _PLAIN_ATTRS:
            return getattr(self._base, name)
        if name in _ELEMENTWISE:
            method = getattr(self._base, name)

            def elementwise(*args: Any, **kwargs: Any) -> Any:
                return method(*_align(list(args)), **kwargs)

            return elementwise
        if name in _ATOMICS:
            run = self.run
            if run is not None and run.launch_instances > 1:
                raise BatchedFallback("atomics across instances: exact interpreter")
            return getattr(self._base, name)
        if name.startswith("__"):
            raise AttributeError(name)
        raise BatchedFallback(f"unsupported op {name}: exact interpreter")

    # -- helpers ------------------------------------------------------------------------------------

    def _handle(self, data: np.ndarray, dtype: Any) -> Any:
        run = self.run
        if run is not None and data.ndim > 1:
            per = data.size // max(1, data.shape[0])
            if per > run.max_elements:
                run.max_elements = per
        return _interp().TensorHandle(data, dtype)

    # -- programming model --------------------------------------------------------------------------

    def set_grid_idx(self, x: int, y: int, z: int) -> None:
        raise BatchedFallback("unsupported op set_grid_idx: exact interpreter")

    def create_get_program_id(self, axis: int) -> Any:
        assert self.run is not None
        coords = self.run.group.coords
        return self._handle(np.ascontiguousarray(coords[:, axis]), _tl().int32)

    def create_get_num_programs(self, axis: int) -> Any:
        assert self.run is not None
        return self._handle(np.array([self.run.group.grid[axis]], dtype=np.int32), _tl().int32)

    def create_make_range(self, ret_ty: Any, start: int, stop: int) -> Any:
        return self._handle(np.arange(start, stop, dtype=np.int32)[None], _tl().int32)

    # -- shapes -------------------------------------------------------------------------------------

    def create_splat(self, ret_ty: Any, arg: Any) -> Any:
        shape = tuple(ret_ty.shape)
        np_dtype = _interp()._get_np_dtype(arg.dtype)
        data = arg.data
        n = data.shape[0]
        scalar = data.reshape(n, -1)[:, :1].reshape((n,) + (1,) * len(shape))
        return self._handle(np.broadcast_to(scalar.astype(np_dtype, copy=False), (n,) + shape), arg.dtype.scalar)

    def create_unsplat(self, arg: Any) -> Any:
        data = arg.data
        return self._handle(np.ascontiguousarray(data.reshape(data.shape[0], -1)[:, 0]), arg.dtype.scalar)

    def create_broadcast(self, arg: Any, shape: list[int]) -> Any:
        data = arg.data
        return self._handle(np.broadcast_to(data, (data.shape[0],) + tuple(shape)), arg.dtype.scalar)

    def create_expand_dims(self, arg: Any, axis: int) -> Any:
        return self._handle(np.expand_dims(arg.data, axis + 1 if axis >= 0 else axis), arg.dtype.scalar)

    def create_reshape(self, arg: Any, shape: list[int], allow_reorder: bool) -> Any:
        data = arg.data
        return self._handle(data.reshape((data.shape[0],) + tuple(shape)), arg.dtype.scalar)

    def create_trans(self, arg: Any, perm: list[int]) -> Any:
        return self._handle(np.transpose(arg.data, (0,) + tuple(p + 1 for p in perm)), arg.dtype.scalar)

    def create_cat(self, lhs: Any, rhs: Any) -> Any:
        a, b = _batch_broadcast(lhs.data, rhs.data)
        return self._handle(np.concatenate([a, b], axis=1), lhs.dtype.scalar)

    def create_join(self, lhs: Any, rhs: Any) -> Any:
        a, b = np.broadcast_arrays(lhs.data, rhs.data)
        return self._handle(np.stack([a, b], axis=-1), lhs.dtype.scalar)

    def create_gather(self, src: Any, indices: Any, axis: int) -> Any:
        a, i = _batch_broadcast(src.data, indices.data)
        return self._handle(np.take_along_axis(a, i, axis=axis + 1), src.dtype.scalar)

    def create_dot(self, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        ip = _interp()
        tl = _tl()
        a_data, b_data = a.data, b.data
        if (a.dtype.primitive_bitwidth == 8 and a.dtype.is_floating()) or \
                (b.dtype.primitive_bitwidth == 8 and b.dtype.is_floating()):
            a_data = ip._convert_float(a_data, a.dtype, tl.float16, None).view(np.float16)
            b_data = ip._convert_float(b_data, b.dtype, tl.float16, None).view(np.float16)
        acc = d.data
        n = max(a_data.shape[0], b_data.shape[0], acc.shape[0])
        out = np.empty((n,) + np.broadcast_shapes(acc.shape[1:], (a_data.shape[1], b_data.shape[2])), acc.dtype)
        # one product per instance, as the interpreter forms it: a stacked matmul may take another path
        for i in range(n):
            out[i] = np.matmul(a_data[i % a_data.shape[0]], b_data[i % b_data.shape[0]], dtype=acc.dtype) \
                + acc[i % acc.shape[0]]
        return self._handle(out, d.dtype.scalar)

    # -- memory -------------------------------------------------------------------------------------

    def create_load(self, ptr: Any, cache_policy: Any, is_volatile: bool) -> Any:
        return self.create_masked_load(ptr, None, None, cache_policy, is_volatile)

    def create_store(self, ptr: Any, val: Any, cache_policy: Any) -> Any:
        return self.create_masked_store(ptr, val, None, cache_policy)

    def create_masked_load(self, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: bool) -> Any:
        ip = _interp()
        dtype_tt = ptrs.get_element_ty()
        dtype_np = ip._get_np_dtype(dtype_tt)
        p = ptrs.data
        arrays = [p] + ([mask.data] if mask is not None else []) + ([other.data] if other is not None else [])
        arrays = _align_raw(arrays)
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        p = np.broadcast_to(arrays[0], shape)
        m = np.broadcast_to(arrays[1], shape) if mask is not None else np.ones(shape, dtype=bool)
        if other is not None:
            o = np.broadcast_to(arrays[-1], shape)
        else:
            o = np.zeros(shape, dtype=dtype_np)
        return self._handle(ip._interpreter.load(p, m, o, dtype_np), dtype_tt)

    def create_masked_store(self, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        ip = _interp()
        arrays = [ptrs.data, value.data] + ([mask.data] if mask is not None else [])
        arrays = _align_raw(arrays)
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        p = np.broadcast_to(arrays[0], shape)
        v = np.broadcast_to(arrays[1], shape)
        m = np.broadcast_to(arrays[2], shape) if mask is not None else np.ones(shape, dtype=bool)
        run = self.run
        if run is not None:
            old = ip._interpreter.load(p, m, np.zeros(shape, dtype=v.dtype), v.dtype)
            run.undo.append((p, old, m))
        return ip._interpreter.store(p, v, m)

    # -- what cannot be batched ---------------------------------------------------------------------

    def create_print(self, *args: Any) -> Any:
        raise BatchedFallback("unsupported op device_print (output per instance): exact interpreter")


def _align_raw(arrays: list[np.ndarray]) -> list[np.ndarray]:
    top = max(a.ndim for a in arrays)
    return [a.reshape(a.shape + (1,) * (top - a.ndim)) for a in arrays]


def _batch_broadcast(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = max(a.shape[0], b.shape[0])
    return (np.broadcast_to(a, (n,) + a.shape[1:]), np.broadcast_to(b, (n,) + b.shape[1:]))


def _tl() -> Any:
    import triton.language as tl

    return tl


# -- reductions and scans -----------------------------------------------------------------------------


def _to_tensor(data: Any, dtype: Any) -> Any:
    """A language tensor from per-instance data (leading axis), as the interpreter types its results."""
    ip = _interp()
    tl = _tl()
    data = np.asarray(data).astype(ip._get_np_dtype(dtype))
    ty = tl.block_type(dtype, list(data.shape[1:])) if data.ndim > 1 else dtype
    return tl.core.tensor(ip.TensorHandle(data, dtype.scalar), ty)


def _slice_tensor(data: np.ndarray, k: int, axis: int, dtype: Any) -> Any:
    return _to_tensor(np.take(data, k, axis=axis), dtype)


def _combine(combine_fn: Any, acc: tuple[Any, ...], item: tuple[Any, ...]) -> tuple[Any, ...]:
    ret = combine_fn.fn(*acc, *item)
    return ret if isinstance(ret, tuple) else (ret,)


def _result_data(value: Any, like: np.ndarray) -> np.ndarray:
    data = value.handle.data if hasattr(value, "handle") else np.asarray(value)
    return np.asarray(data).astype(like.dtype, copy=False)


class _Reduce:
    """`tl.reduce` over per-instance blocks: the interpreter's reductions along the block's axis + 1."""

    def __init__(self, axis: int | None, combine_fn: Any, keep_dims: bool) -> None:
        self.axis = axis
        self.combine_fn = combine_fn
        self.keep_dims = keep_dims

    def apply(self, input: Any) -> Any:
        if not isinstance(input, tuple):
            return self.apply((input,))[0]
        tl = _tl()
        for arg in input:
            if not isinstance(arg, tl.core.tensor):
                raise ValueError(f"input must be a tensor, got {type(arg)}")
            if self.axis is not None and self.axis >= len(arg.shape):
                raise ValueError(f"axis {self.axis} out of bounds for shape {arg.shape}")
        ret = self._impl(input)
        return tuple(ret) if isinstance(ret, (list, tuple)) else (ret,)

    def _prepare(self, input: tuple[Any, ...]) -> tuple[list[np.ndarray], int, int]:
        rank = len(input[0].shape)
        datas = []
        for arg in input:
            data = arg.handle.data
            if data.ndim == 1:
                data = data[:, None]
            datas.append(data)
        if self.axis is None:
            return [np.ascontiguousarray(d).reshape(d.shape[0], -1) for d in datas], 1, rank
        return datas, self.axis + 1 if self.axis >= 0 else self.axis, rank

    def _finish(self, data: np.ndarray, axis: int, rank: int) -> np.ndarray:
        if not self.keep_dims:
            return data
        if self.axis is None:
            return data.reshape((data.shape[0],) + (1,) * rank)
        return np.expand_dims(data, axis)

    def _impl(self, input: tuple[Any, ...]) -> Any:
        tl = _tl()
        std = tl.standard
        fn = self.combine_fn
        datas, axis, rank = self._prepare(input)
        dtype = input[0].dtype
        if fn is std._argmin_combine_tie_break_left or fn is std._argmin_combine_tie_break_fast:
            return (_to_tensor(self._finish(np.nanmin(datas[0], axis=axis), axis, rank), dtype),
                    _to_tensor(self._finish(np.nanargmin(datas[0], axis=axis), axis, rank), tl.int32))
        if fn is std._argmax_combine_tie_break_left or fn is std._argmax_combine_tie_break_fast:
            return (_to_tensor(self._finish(np.nanmax(datas[0], axis=axis), axis, rank), dtype),
                    _to_tensor(self._finish(np.nanargmax(datas[0], axis=axis), axis, rank), tl.int32))
        if fn is std._elementwise_max:
            return _to_tensor(self._finish(np.nanmax(datas[0], axis=axis), axis, rank), dtype)
        if fn is std._elementwise_min:
            return _to_tensor(self._finish(np.nanmin(datas[0], axis=axis), axis, rank), dtype)
        if fn is std._sum_combine:
            return _to_tensor(self._finish(np.sum(datas[0], axis=axis), axis, rank), dtype)
        # any other combine function: a left fold along the axis, as the interpreter folds it
        dtypes = [arg.dtype for arg in input]
        acc = tuple(_slice_tensor(d, 0, axis, t) for d, t in zip(datas, dtypes))
        for k in range(1, datas[0].shape[axis]):
            item = tuple(_slice_tensor(d, k, axis, t) for d, t in zip(datas, dtypes))
            acc = tuple(_to_tensor(_result_data(v, d), t)
                        for v, d, t in zip(_combine(fn, acc, item), datas, dtypes))
        return [_to_tensor(self._finish(a.handle.data, axis, rank), t) for a, t in zip(acc, dtypes)]


class _Scan:
    """`tl.associative_scan` over per-instance blocks."""

    def __init__(self, axis: int, combine_fn: Any, reverse: bool) -> None:
        self.axis = axis
        self.combine_fn = combine_fn
        self.reverse = reverse

    def apply(self, input: Any) -> Any:
        if not isinstance(input, tuple):
            return self.apply((input,))[0]
        tl = _tl()
        axis = self.axis + 1 if self.axis >= 0 else self.axis
        datas = [arg.handle.data for arg in input]
        dtypes = [arg.dtype for arg in input]
        if self.reverse:
            datas = [np.ascontiguousarray(np.flip(d, axis=axis)) for d in datas]
        if self.combine_fn == tl.standard._sum_combine:
            outs = [np.cumsum(datas[0], axis=axis)]
        elif self.combine_fn == tl.standard._prod_combine:
            outs = [np.cumprod(datas[0], axis=axis)]
        else:
            outs = [np.array(np.broadcast_to(d, d.shape)) for d in datas]
            acc = tuple(_slice_tensor(d, 0, axis, t) for d, t in zip(datas, dtypes))
            for k in range(1, datas[0].shape[axis]):
                item = tuple(_slice_tensor(d, k, axis, t) for d, t in zip(datas, dtypes))
                acc = tuple(_to_tensor(_result_data(v, d), t)
                            for v, d, t in zip(_combine(self.combine_fn, acc, item), datas, dtypes))
                for out, a in zip(outs, acc):
                    index = [slice(None)] * out.ndim
                    index[axis] = k
                    out[tuple(index)] = a.handle.data
        if self.reverse:
            outs = [np.ascontiguousarray(np.flip(o, axis=axis)) for o in outs]
        return tuple(_to_tensor(o, t) for o, t in zip(outs, dtypes))


# -- decisions: where Python control flow reads a value ----------------------------------------------


def _tensor_bool(self: Any) -> bool:
    data = self.handle.data
    if data.ndim > 1:
        per = data.reshape(data.shape[0], -1)
        if per.shape[1] != 1:
            return True
        data = per[:, 0]
    values = data.astype(bool)
    if values.shape[0] == 1 or values.all() or not values.any():
        return bool(values[0])
    raise _Diverged(values, _where())


def _tensor_index(self: Any) -> int:
    data = self.handle.data
    values = data.reshape(data.shape[0], -1)[:, 0] if data.ndim > 1 else data
    if values.shape[0] == 1 or bool((values == values[0]).all()):
        return int(values[0])
    raise _Diverged(values, _where())


def _tensor_transpose(self: Any) -> Any:
    tl = _tl()
    handle = _interp().TensorHandle(np.swapaxes(self.handle.data, -1, -2), self.handle.dtype)
    shape = list(self.type.shape)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    return tl.core.tensor(handle, tl.core.block_type(self.dtype, shape))


def _where() -> str:
    """file:line in the kernel where the current decision is made (for the fallback reason)."""
    import triton

    skip = (triton.__file__.rsplit("/", 1)[0], __file__)
    frame = inspect.currentframe()
    try:
        f = frame.f_back if frame is not None else None
        while f is not None:
            name = f.f_code.co_filename
            if not name.startswith(skip[0]) and name != skip[1]:
                return f"{name.rsplit('/', 1)[-1]}:{f.f_lineno}"
            f = f.f_back
    finally:
        del frame
    return "?"


# -- the language, pointed at a builder -------------------------------------------------------------


def _rewritten(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The interpreter's rewrite of a kernel's body (cached by the interpreter)."""
    ip = _interp()
    cache = ip.InterpretedFunction.rewritten_fn
    if fn not in cache:
        cache[fn] = ip.FunctionRewriter(fn).rewrite_ast()
    return cache[fn]


class _Globals:
    """Names set in kernel modules' globals for one launch, put back after it."""

    def __init__(self) -> None:
        self.saved: list[tuple[dict[str, Any], str, Any]] = []
        self.seen: set[int] = set()
        self.names: dict[str, Any] = {}

    def enter(self, fn: Callable[..., Any]) -> None:
        g = fn.__globals__
        if id(g) in self.seen or not self.names:
            return
        self.seen.add(id(g))
        for name, value in self.names.items():
            self.saved.append((g, name, g.get(name, _MISSING)))
            g[name] = value

    def restore(self) -> None:
        while self.saved:
            g, name, value = self.saved.pop()
            if value is _MISSING:
                g.pop(name, None)
            else:
                g[name] = value
        self.seen.clear()


_MISSING = object()
_GLOBALS = _Globals()


def _nested_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    _GLOBALS.enter(self.fn)
    return _rewritten(self.fn)(*args, **kwargs)


def _per_instance(value: Any) -> np.ndarray | int:
    if hasattr(value, "handle"):
        data = value.handle.data
        return data.reshape(data.shape[0], -1)[:, 0] if data.ndim > 1 else data
    return int(value)


def _batched_range(arg1: Any, arg2: Any = None, step: Any = None, **kwargs: Any) -> Any:
    """`range` whose bounds may differ between instances, as long as the trip counts do not.

    Bounds the same for every instance give the interpreter's Python range; otherwise the loop variable
    is a per-instance tensor, and instances with different trip counts are split apart.
    """
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    step = 1 if step is None else step
    parts = [_per_instance(v) for v in (start, end, step)]
    if all(isinstance(p, int) or (p.shape[0] == 1 or bool((p == p[0]).all())) for p in parts):
        return range(*(p if isinstance(p, int) else int(p[0]) for p in parts))
    a, b, c = (np.asarray(p, dtype=np.int64) for p in parts)
    if (c == 0).any():
        raise ValueError("range() arg 3 must not be zero")
    trips = np.where(c > 0, np.maximum(0, (b - a + c - 1) // np.where(c > 0, c, 1)),
                     np.maximum(0, (a - b - c - 1) // np.where(c < 0, -c, 1)))
    trips = np.broadcast_to(trips, np.broadcast_shapes(a.shape, b.shape, c.shape))
    if not bool((trips == trips[0]).all()):
        raise _Diverged(np.ascontiguousarray(trips), _where())
    return _RangeIter(a, c, int(trips[0]))


class _RangeIter:
    def __init__(self, start: np.ndarray, step: np.ndarray, trips: int) -> None:
        self.start, self.step, self.trips = start, step, trips

    def __iter__(self) -> Any:
        tl = _tl()
        ip = _interp()
        for k in range(self.trips):
            value = self.start + k * self.step
            dtype = (np.int32, tl.int32) if value.min() >= -2**31 and value.max() < 2**31 else (np.int64, tl.int64)
            yield tl.core.tensor(ip.TensorHandle(np.ascontiguousarray(value.astype(dtype[0])), dtype[1]), dtype[1])


def _patch_builtins(pkg: Any, semantic: Any, scope: Any) -> None:
    tl = _tl()
    for name, member in inspect.getmembers(pkg):
        if tl.core.is_builtin(member):
            def patched(*args: Any, _member: Any = member, **kwargs: Any) -> Any:
                kwargs.pop("_semantic", None)
                return _member(*args, **kwargs, _semantic=semantic)

            scope.set_attr(pkg, name, patched)


def _patch_language(fn: Callable[..., Any], semantic: Any, batched: bool) -> Any:
    """Point `triton.language` at `semantic` for the kernel's run; returns the scope that restores it."""
    ip = _interp()
    tl = _tl()
    from triton.runtime.jit import JITFunction

    scope = ip._LangPatchScope()
    try:
        for lang in (tl, tl.core):
            _patch_builtins(lang, semantic, scope)
            _patch_builtins(lang.tensor, semantic, scope)
            if lang is tl:
                _patch_builtins(lang.math, semantic, scope)
            ip._patch_lang_tensor(lang.tensor, scope)
            ip._patch_lang_core(lang, scope)
        _patch_builtins(tl.core.tensor_descriptor_base, semantic, scope)
        scope.set_attr(JITFunction, "__call__", _nested_call)
        if batched:
            def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: bool = False, **kw: Any) -> Any:
                return _Reduce(axis, combine_fn, keep_dims).apply(input)

            def scan(input: Any, axis: Any, combine_fn: Any, reverse: bool = False, **kw: Any) -> Any:
                return _Scan(axis, combine_fn, reverse).apply(input)

            for mod in (tl, tl.core):
                scope.set_attr(mod, "reduce", reduce)
                scope.set_attr(mod, "associative_scan", scan)
            scope.set_attr(tl.core.tensor, "__bool__", _tensor_bool)
            scope.set_attr(tl.core.tensor, "__index__", _tensor_index)
            scope.set_attr(tl.core.tensor, "T", property(_tensor_transpose))
            for mod in (tl, tl.core):
                scope.set_attr(mod, "range", _batched_range)
                scope.set_attr(mod, "static_range", _batched_range)
            _GLOBALS.names = {"range": _batched_range}
        else:
            _GLOBALS.names = {}
    except BaseException:
        scope.restore()
        raise
    return scope


# -- arguments, grid ---------------------------------------------------------------------------------


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kernel's arguments as the interpreter passes them: constexprs as given, the rest converted."""
    from triton.runtime.jit import _normalize_ty

    ip = _interp()
    spec = inspect.getfullargspec(fn)
    kwargs = {k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs}
    annotations = {name: _normalize_ty(ty) for name, ty in inspect.get_annotations(fn).items()}
    bound = inspect.getcallargs(fn, *args, **kwargs)
    return {name: arg if annotations.get(name) == "constexpr" else ip._implicit_cvt(arg)
            for name, arg in bound.items()}


def _grid3(grid: Any, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(inspect.getcallargs(fn, *args, **{k: v for k, v in kwargs.items()
                                                      if k in inspect.getfullargspec(fn).args}))
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"grid {grid!r}: a launch grid has 1 to 3 dimensions; pass e.g. (n,) or (x, y)")
    return grid + (1,) * (3 - len(grid))  # type: ignore[return-value]


def _raw_fn(fn: Any) -> Callable[..., Any]:
    return getattr(fn, "fn", fn)


# -- running ----------------------------------------------------------------------------------------

_REASONS: dict[Any, str] = {}


def fallback_reason_cached(fn: Any) -> str | None:
    """The reason a kernel was last sent to the exact interpreter for good, if it was."""
    return _REASONS.get(_raw_fn(fn))


def _undo(log: list[tuple[np.ndarray, np.ndarray, np.ndarray]], start: int = 0) -> None:
    store = _interp()._interpreter.store
    while len(log) > start:
        p, old, m = log.pop()
        store(p, old, m)


def run_batched(fn: Any, grid: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> str | None:
    """Run a `@triton.jit` launch with all program instances at once.

    `fn`: the JITFunction (or its Python function); `grid`: a tuple, or a callable of the bound
    arguments; `args`/`kwargs`: the launch's arguments, constexprs included, tensors on the host.
    Returns None when the launch ran, else the reason it did not (memory then is as it was before).
    """
    raw = _raw_fn(fn)
    kwargs = dict(kwargs or {})
    reason = _REASONS.get(raw)
    if reason is not None:
        return reason
    gx, gy, gz = _grid3(grid, raw, args, kwargs)
    total = gx * gy * gz
    if total == 0:
        return None
    if total == 1:
        return "one program instance: exact interpreter"
    src = getattr(fn, "src", None) or ""
    if "atomic_" in src:
        _REASONS[raw] = reason = "atomics across instances: exact interpreter"
        return reason
    with _LOCK:
        return _run_all(raw, (gx, gy, gz), total, args, kwargs)


def _run_all(raw: Callable[..., Any], grid: tuple[int, int, int], total: int, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> str | None:
    from triton.language.semantic import TritonSemantic

    ip = _interp()
    body = _rewritten(raw)
    builder = BatchedBuilder(ip.interpreter_builder)
    semantic = TritonSemantic(builder)
    scope = _patch_language(raw, semantic, batched=True)
    _GLOBALS.enter(raw)
    log: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    try:
        bound = _bind(raw, args, kwargs)
        coords = np.stack(np.unravel_index(np.arange(total), grid), axis=1).astype(np.int32)
        start, size, groups = 0, min(total, _FIRST_GROUP), 0
        while start < total:
            groups = 0
            pending = [coords[start:start + size]]
            start += size
            per_instance = 1
            while pending:
                part = pending.pop(0)
                run = _Run(_Group(part, grid), total, log)
                mark = len(log)
                builder.run = run
                try:
                    body(**bound)
                except _Diverged as d:
                    _undo(log, mark)
                    keys = d.keys
                    _, first = np.unique(keys, return_index=True)
                    parts = [part[keys == keys[i]] for i in sorted(first)]
                    groups += len(parts) - 1
                    if groups >= _MAX_GROUPS:
                        raise BatchedFallback(
                            f"divergent control flow at {d.where} (instances take different branches or loop "
                            f"trip counts: more than {_MAX_GROUPS} groups): exact interpreter") from None
                    pending = parts + pending
                    continue
                per_instance = max(per_instance, run.max_elements)
            size = max(1, min(total, _GROUP_ELEMENTS // per_instance))
        return None
    except BatchedFallback as e:
        _undo(log)
        _REASONS[raw] = e.reason
        return e.reason
    except Exception as e:  # the exact interpreter runs it and reports the kernel's own error
        _undo(log)
        return f"batched run failed ({type(e).__name__}: {e}): exact interpreter"
    finally:
        builder.run = None
        _GLOBALS.restore()
        scope.restore()


def run_interpreter(fn: Any, grid: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> None:
    """The exact interpreter: Triton's GridExecutor, one program instance after another.

    Nested `@triton.jit` calls run through the interpreter's rewrite of their body, as they do under
    TRITON_INTERPRET=1.
    """
    ip = _interp()
    raw = _raw_fn(fn)
    kwargs = dict(kwargs or {})
    grid3 = _grid3(grid, raw, args, kwargs)
    arg_names = list(inspect.signature(raw).parameters)
    with _LOCK:
        scope = _patch_language(raw, ip.interpreter_semantic, batched=False)
        try:
            ip.GridExecutor(_rewritten(raw), arg_names, grid3)(*args, **kwargs)
        finally:
            scope.restore()
