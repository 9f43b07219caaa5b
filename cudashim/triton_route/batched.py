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

A launch is traced once per specialization (the front end's Python runs, every operation is taped) and
later launches replay the tape: the same numpy calls, each Python-level decision checked to come out
the same, a group undone and traced again where one does not. The values a tape makes from program ids,
constants and scalar arguments alone (offsets, masks, loop bounds) are kept from a replay for the next
one of the same group and scalars; a replay runs only what reads memory or a pointer argument. Where
the pointer arguments hold the same addresses as a kept replay's (a decode step storing into the same
cache), their address arithmetic is kept too, and a replay runs only the loads, the stores and what
depends on loaded values.

Offsets and pointers of the form base + stride * index (program id times a block size plus `tl.arange`,
times a row stride...) are kept as that formula: a load or store through one is a strided view of the
argument's storage (or an index into it) rather than address-by-address arithmetic, and a mask whose
comparison has one outcome in every lane is a constant. A mask that keeps the same rectangle of lanes in
every instance (a row's columns below its length) makes its load or store the unmasked rectangle;
instances laid out on a grid (heads by chunks) are one view with an axis per grid axis, and scattered
instances whose blocks are runs of consecutive elements (cache slots) are rows of a 2-d view. The
formula is exact integer arithmetic; where a value could leave its type's range, or a lane the
storage, the interpreter's own operation decides.

`execute` is the Triton route's executor (launch.add_executor); `run_batched` the same without the
route's interpreter fixes. Each returns None when it ran the launch, or the reason it did not, having
left memory as it found it; the route then runs the exact interpreter.
"""

from __future__ import annotations

import bisect
import inspect
import math
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np

from . import _bf16

__all__ = ["execute", "run_batched", "run_interpreter", "BatchedFallback", "fallback_reason_cached", "STATS"]

# Elements of one value, summed over the instances of a group: the group size adapts to keep values
# about this large, so a launch of many programs does not build one enormous array.
_GROUP_ELEMENTS = 1 << 22
# At most this many instances in the first group of a launch, before the kernel's block sizes are known.
_FIRST_GROUP_MAX = 1024
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


_MODULES: list[Any] = []


def _interp() -> Any:
    if not _MODULES:
        import triton.language as tl
        from triton.runtime import interpreter

        _MODULES[:] = [interpreter, tl]
    return _MODULES[0]


def _put(view: np.ndarray, idx: np.ndarray, values: np.ndarray) -> None:
    view[idx] = values


_VIEWS: dict[tuple[int, int, np.dtype], np.ndarray] = {}


class _Memory:
    """The launch's tensors as numpy arrays, so that loads and stores are gathers and scatters.

    A pointer block is served from the one argument storage that holds its first unmasked address;
    anything else (addresses outside it, an element size that does not divide an offset) takes the
    interpreter's element-by-element path.
    """

    def __init__(self, tensors: list[Any]) -> None:
        spans: dict[int, int] = {}
        self._keep = []
        for t in tensors:
            storage = t.untyped_storage()
            start, size = storage.data_ptr(), storage.nbytes()
            if size and spans.get(start, -1) < size:
                spans[start] = size
                self._keep.append(storage)
        self.starts = sorted(spans)
        self.sizes = [spans[s] for s in self.starts]

    def _view(self, i: int, dtype: np.dtype) -> np.ndarray:
        # kept across launches by (address, size, type): one is only used while a live storage of this
        # launch spans exactly those bytes
        key = (self.starts[i], self.sizes[i], dtype)
        view = _VIEWS.get(key)
        if view is None:
            import ctypes

            n = self.sizes[i] // dtype.itemsize
            raw = (ctypes.c_byte * (n * dtype.itemsize)).from_address(self.starts[i])
            if len(_VIEWS) > 512:
                _VIEWS.clear()
            view = _VIEWS[key] = np.frombuffer(raw, dtype=dtype)
        return view

    def locate(self, p: np.ndarray, m: np.ndarray | None, dtype: np.dtype,
               aligned: bool = False) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """(typed view, element indices, whether every index is in bounds) for pointer block `p` under mask
        `m`, or None. Masked-off lanes may hold any index: they must be clipped and discarded."""
        if not self.starts or p.size == 0:
            return None
        if m is not None:
            first = int(np.argmax(m))
            if not m.flat[first]:
                return None
            probe = int(p.flat[first])
        else:
            probe = int(p.flat[0])
        i = bisect.bisect_right(self.starts, probe) - 1
        if i < 0 or probe >= self.starts[i] + self.sizes[i]:
            return None
        dtype = np.dtype(dtype)
        size = dtype.itemsize
        start = self.starts[i]
        if start % size:
            return None
        # in int64 (the same bits as the uint64 difference); read as uint64 below, an address under the
        # storage's start is a huge index, so one maximum bounds both sides
        off = p.view(np.int64) - start
        if size > 1:
            if not aligned:
                low = np.bitwise_and(off, size - 1)
                if (low.any() if m is None else np.logical_and(low, m).any()):
                    return None
            off >>= size.bit_length() - 1
        view = self._view(i, dtype)
        n = view.shape[0]
        if off.size:
            unsigned = off.view(np.uint64)
            if int(unsigned.max()) >= n:  # some lane out of the storage: fine only where masked off
                if m is None or int(np.max(unsigned, where=m, initial=0)) >= n:
                    return None
                return view, off, False
        return view, off, True


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
    undo: list[Callable[[], None]] = field(default_factory=list)
    memory: _Memory | None = None
    max_elements: int = 1
    irreversible: bool = False
    # the launch's last group, past the last decision of a replayed tape: nothing after can send the
    # launch back, so stores keep no undo log (an error from here on is the kernel's own)
    undo_free: bool = False
    final: bool = False


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
create_erf create_rsqrt create_split create_barrier create_assert create_assume
create_extern_elementwise
""".split())

# Operations that order instances against each other: only a launch of one instance may run them here.
_ATOMICS = frozenset("create_atomic_cas create_atomic_rmw create_atomic_load create_atomic_store "
                     "create_atomic_poll".split())

# Attributes the language front end reads from a builder without calling it.
_PLAIN_ATTRS = frozenset("options codegen_fns arch".split())


# a pointer value whose every address is an argument's pointer plus a whole number of elements
_ALIGNED = "cudashim_aligned"


def _keep_aligned(src: Any, out: Any) -> Any:
    if _ALIGNED in src.attr:
        out.attr[_ALIGNED] = True
    return out


def _elementwise(base: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    # looked up at each call: the route patches the interpreter's builder for a launch (bf16, libdevice)
    return getattr(base, name)(*_align(list(args)), **kwargs)


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


# -- recording a launch once, replaying it ------------------------------------------------------------
#
# The language front end (type checks, broadcasting rules, tensor objects) costs more Python than the
# numpy work of a small block. A run records every operation that makes or uses a value (the builder's,
# and the reductions', scans' and loops' of this module) with where its operands came from, and every
# Python-level decision with its outcome. A later launch of the same specialization replays that tape:
# the same numpy calls on the new arguments, each decision checked to come out the same; where one does
# not, the group is undone and run through the front end again.


class _Slot:
    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i


class _Seq:
    """A list or tuple of operands, some of them taped values."""

    __slots__ = ("items", "kind")

    def __init__(self, items: list[Any], kind: type) -> None:
        self.items, self.kind = items, kind

    def resolve(self, slots: list[Any]) -> Any:
        return self.kind(_resolve(x, slots) for x in self.items)


def _resolve(a: Any, slots: list[Any]) -> Any:
    if a.__class__ is _Slot:
        return slots[a.i]
    if a.__class__ is _Seq:
        return a.resolve(slots)
    return a


class _GuardFailed(Exception):
    pass


class _Unrecorded(Exception):
    pass


class _Plan:
    """Which operations of a tape run at every replay (`dynamic`: (index, op)) and which values the rest
    make, kept in `statics` by the group and the values of the arguments in `key_args`."""

    __slots__ = ("dynamic", "dynamic_at", "static_needed", "key_args", "statics", "by_address")

    def __init__(self, dynamic: list[tuple[int, tuple[Any, ...]]], static_needed: list[int], key_args: list[str]) -> None:
        self.by_address = False  # pointers' addresses are among the key arguments
        self.dynamic = dynamic
        self.dynamic_at = {at for at, _ in dynamic}
        self.static_needed = static_needed
        self.key_args = key_args
        self.statics: dict[Any, tuple[list[tuple[int, Any]], int, tuple[int, int]]] = {}


class _Tape:
    def __init__(self) -> None:
        self.ops: list[tuple[Any, ...]] = []
        self.ids: dict[int, int] = {}
        self.keep: list[Any] = []
        self.n = 0
        self.args: dict[str, int] = {}
        self.broken: str | None = None
        self.last_check = -1  # index of the last decision (guard or trip count) among the ops
        # ways to reuse values between replays, the most specific first (see _plan_statics)
        self.plans: list[_Plan] = []

    def add(self, h: Any) -> int:
        i = self.n
        self.n += 1
        self.ids[id(h)] = i
        self.keep.append(h)
        return i

    def ref(self, v: Any, handle_type: type) -> Any:
        if isinstance(v, handle_type):
            i = self.ids.get(id(v))
            if i is None:
                raise _Unrecorded
            return _Slot(i)
        if isinstance(v, (list, tuple)) and any(isinstance(x, handle_type) for x in v):
            return _Seq([self.ref(x, handle_type) for x in v], type(v))
        return v

    def record(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        handle_type = _interp().TensorHandle
        has_out = isinstance(out, handle_type) or (isinstance(out, tuple) and out and
                                                     all(isinstance(o, handle_type) for o in out))
        try:
            refs = [self.ref(a, handle_type) for a in args]
            krefs = {k: self.ref(v, handle_type) for k, v in kwargs.items()}
        except _Unrecorded:
            self.broken = f"{getattr(fn, '__name__', fn)} used a value made outside the recorded operations"
            return
        if not has_out and not any(isinstance(r, (_Slot, _Seq)) for r in refs) and \
                not any(isinstance(r, (_Slot, _Seq)) for r in krefs.values()):
            return
        if isinstance(out, handle_type):
            outs: Any = self.add(out)
        elif has_out:
            outs = tuple(self.add(o) for o in out)
        else:
            outs = None
        self.ops.append((0, fn, refs, krefs, outs))

    def guard(self, check: Callable[[Any], Any], h: Any, expected: Any) -> None:
        try:
            r = self.ref(h, _interp().TensorHandle)
        except _Unrecorded:
            self.broken = "a decision on a value made outside the recorded operations"
            return
        self.ops.append((1, check, [r], {}, expected))


class _State:
    tape: _Tape | None = None


_STATE = _State()


def _emit(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    out = fn(*args, **kwargs)
    tape = _STATE.tape
    if tape is not None and tape.broken is None:
        tape.record(fn, args, kwargs, out)
    return out


def _guard(check: Callable[[Any], Any], h: Any) -> Any:
    value = check(h)
    tape = _STATE.tape
    if tape is not None and tape.broken is None:
        tape.guard(check, h, value)
    return value


def _replay(tape: _Tape, bound: dict[str, Any], run: _Run | None = None) -> None:
    slots: list[Any] = [None] * tape.n
    for name, i in tape.args.items():
        slots[i] = bound[name].handle
    free_from = tape.last_check + 1 if run is not None and run.final else -1
    ops: Any = enumerate(tape.ops)
    # plans whose values this replay makes and keeps: [plan, key, compares, selects counted by its dynamic ops]
    filling: list[list[Any]] = []
    if tape.plans and run is not None:
        # the values made from program ids, constants and the key arguments alone are the same at every
        # launch of this group with these arguments: taken from the first such replay
        group = (run.group.grid, run.group.coords.tobytes())
        counted = (STATS["constant_compares"], STATS["constant_selects"])
        for plan in tape.plans:
            key = group + tuple(bound[name].handle.data.tobytes() for name in plan.key_args)
            hit = plan.statics.get(key)
            if hit is None:
                filling.append([plan, key, 0, 0])
                continue
            values, max_elements, (compares, selects) = hit
            for i, v in values:
                slots[i] = v
            if max_elements > run.max_elements:
                run.max_elements = max_elements
            STATS["constant_compares"] += compares
            STATS["constant_selects"] += selects
            STATS["reused_statics"] += 1
            if plan.by_address:
                STATS["reused_addresses"] += 1
            ops = plan.dynamic
            break
    for at, (kind, fn, refs, krefs, out) in ops:
        if at >= free_from >= 0 and not run.undo_free:  # type: ignore[union-attr]
            run.undo_free = True  # type: ignore[union-attr]
        if filling:
            before = (STATS["constant_compares"], STATS["constant_selects"])
        args = [slots[a.i] if a.__class__ is _Slot else (a.resolve(slots) if a.__class__ is _Seq else a)
                for a in refs]
        if kind == 0:
            if krefs:
                r = fn(*args, **{k: _resolve(v, slots) for k, v in krefs.items()})
            else:
                r = fn(*args)
            if filling:  # what the operations that run at every replay of a plan count
                for f in filling:
                    if at in f[0].dynamic_at:
                        f[2] += STATS["constant_compares"] - before[0]
                        f[3] += STATS["constant_selects"] - before[1]
            if out is None:
                continue
            if out.__class__ is int:
                slots[out] = r
            else:
                for i, h in zip(out, r):
                    slots[i] = h
        elif fn(*args) != out:  # a decision the instances disagree on raises _Diverged
            raise _GuardFailed
    for plan, key, compares, selects in filling:
        if len(plan.statics) >= _MAX_STATICS:
            plan.statics.clear()
        # with the constant comparisons and selects the skipped operations would have counted
        plan.statics[key] = ([(i, slots[i]) for i in plan.static_needed], run.max_elements,  # type: ignore[union-attr]
                             (STATS["constant_compares"] - counted[0] - compares,
                              STATS["constant_selects"] - counted[1] - selects))


# Operations whose result depends only on their operands' values (no memory, no launch state but the
# group's program ids): on operands fixed for a group and its scalar arguments, fixed too.
_PURE_METHODS = frozenset("""
create_add create_sub create_mul create_srem create_and create_or create_select create_icmpSLT create_icmpSLE create_icmpSGT create_icmpSGE
create_int_cast create_get_program_id create_get_num_programs create_make_range create_addptr create_splat
create_unsplat create_broadcast create_expand_dims create_reshape create_trans create_cat create_join
create_gather create_dot
""".split())
_MAX_STATICS = 4


def _pure(fn: Any) -> bool:
    if fn.__class__ is partial:
        return fn.func is _elementwise
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        return owner.__class__ is BatchedBuilder and fn.__name__ in _PURE_METHODS
    return fn in _PURE_FUNCTIONS


def _plan_statics(tape: _Tape, pointer_args: set[str], opaque_args: set[str]) -> None:
    """Split a finished tape into the operations to run at every replay (those reading memory or an
    argument that does not key the reuse, and all that depend on them) and the rest, whose values a
    replay may reuse. Two plans: pointers' addresses key the reuse too (the address arithmetic is kept
    while a launch passes the same memory, as a decode step does), or only scalars do (any addresses)."""
    for by_address, skip in ((True, opaque_args), (False, pointer_args | opaque_args)):
        plan = _make_plan(tape, skip)
        if plan is not None:
            plan.by_address = by_address and bool(pointer_args)
            tape.plans.append(plan)
    if len(tape.plans) == 2 and len(tape.plans[0].dynamic) == len(tape.plans[1].dynamic):
        del tape.plans[0]  # the addresses fix nothing more: the plan keyed by scalars alone serves


def _make_plan(tape: _Tape, skip: set[str]) -> _Plan | None:
    static = [True] * tape.n
    for name, i in tape.args.items():
        static[i] = name not in skip
    dynamic: list[tuple[int, tuple[Any, ...]]] = []
    needed: set[int] = set()

    def slots_of(refs: Any) -> list[int]:
        out = []
        for a in refs:
            if a.__class__ is _Slot:
                out.append(a.i)
            elif a.__class__ is _Seq:
                out += slots_of(a.items)
        return out

    for at, op in enumerate(tape.ops):
        kind, fn, refs, krefs, out = op
        used = slots_of(list(refs) + list(krefs.values()))
        if (kind != 0 or _pure(fn)) and all(static[i] for i in used):
            continue
        dynamic.append((at, op))
        needed.update(i for i in used if static[i])
        if kind == 0 and out is not None:
            for i in ([out] if out.__class__ is int else out):
                static[i] = False
    if len(dynamic) == len(tape.ops):
        return None  # nothing to reuse
    return _Plan(dynamic, sorted(needed - set(tape.args.values())), [name for name in tape.args if name not in skip])


class _RecordingBuilder:
    """What the language front end sees as its builder: each call runs and, while recording, is taped."""

    def __init__(self, inner: "BatchedBuilder") -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in _PLAIN_ATTRS:
            return getattr(self._inner._base, name)
        fn = getattr(self._inner, name)
        if not callable(fn):
            return fn

        def call(*args: Any, **kwargs: Any) -> Any:
            return _emit(fn, *args, **kwargs)

        if name in _ELEMENTWISE or name in BatchedBuilder.__dict__:
            self.__dict__[name] = call
        return call


# -- index arithmetic kept as a formula ------------------------------------------------------------
#
# Offsets and pointers are mostly `base + stride * index` along each block axis (program id times a
# block size, plus `tl.arange`, times a row stride...). Such a value is kept as that formula: its
# array is only formed when something reads it, and a load or store through such a pointer reads the
# memory as one strided view rather than gathering address by address. The formula is exact integer
# arithmetic; formed as an array it is cast to the value's type, which is the interpreter's wrapped
# result for add, sub and mul. Where a cast or a pointer could see a value outside its type's range
# the array is formed and the interpreter's operation runs on it.

_AFFINE_CLS: list[type] = []
_AFFINE_INTS = (np.dtype(np.int32), np.dtype(np.int64))


def _affine_class() -> type:
    if not _AFFINE_CLS:
        class AffineHandle(_interp().TensorHandle):  # type: ignore[misc, valid-type]
            """value[i, j...] = base[i] + sum_d strides[d] * j_d, for instance i (base of size 1 when the
            same for all) and block index j; its array formed on first read."""

            def __init__(self, base: np.ndarray, strides: tuple[int, ...], shape: tuple[int, ...],
                         np_dtype: np.dtype, dtype: Any) -> None:
                self.aff: tuple[np.ndarray, tuple[int, ...], tuple[int, ...]] | None = (base, strides, shape)
                self.ext: tuple[int, int] | None = None  # (least, greatest) value, once asked
                self.np_dtype = np_dtype
                self._data: np.ndarray | None = None
                self.dtype = dtype
                self.attr = {}

            @property  # type: ignore[misc]
            def data(self) -> np.ndarray:
                if self._data is None:
                    self._data = _form(self.aff, self.np_dtype)  # type: ignore[arg-type]
                return self._data

            @data.setter
            def data(self, value: np.ndarray) -> None:
                self._data, self.aff = value, None

        _AFFINE_CLS.append(AffineHandle)
    return _AFFINE_CLS[0]


def _aff(h: Any) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]] | None:
    return h.aff if _AFFINE_CLS and h.__class__ is _AFFINE_CLS[0] else None


def _form(aff: tuple[np.ndarray, tuple[int, ...], tuple[int, ...]], np_dtype: np.dtype) -> np.ndarray:
    base, strides, shape = aff
    nb, r = base.shape[0], len(shape)
    out = base.reshape((nb,) + (1,) * r)
    for d, (st, n) in enumerate(zip(strides, shape)):
        if st and n > 1:
            along = [1] * (r + 1)
            along[d + 1] = n
            out = out + (np.arange(n, dtype=np.int64) * st).reshape(along)
    out = np.broadcast_to(out, (nb,) + shape)
    if np_dtype == np.uint64:
        return out.view(np.uint64)
    return out.astype(np_dtype) if np_dtype != np.int64 else out


def _affine_extent(aff: tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]) -> tuple[int, int]:
    base, strides, shape = aff
    if base.shape[0] == 1:
        lo = hi = int(base[0])
    else:
        lo, hi = int(base.min()), int(base.max())
    for st, n in zip(strides, shape):
        span = st * (n - 1)
        lo, hi = lo + min(0, span), hi + max(0, span)
    return lo, hi


def _hext(h: Any) -> tuple[int, int]:
    """The extent of a formula handle, computed once: a value reused across replays is asked again."""
    e = h.ext
    if e is None:
        e = h.ext = _affine_extent(h.aff)
    return e


def _hfits(h: Any, np_dtype: np.dtype) -> bool:
    return _fits(h.aff, np_dtype, _hext(h))


def _fits(aff: Any, np_dtype: np.dtype, extent: tuple[int, int] | None = None) -> bool:
    lo, hi = _affine_extent(aff) if extent is None else extent
    limits = _LIMITS.get(np_dtype)
    if limits is None:
        info = np.iinfo(np_dtype)
        limits = _LIMITS[np.dtype(np_dtype)] = (int(info.min), int(info.max))
    return limits[0] <= lo and hi <= limits[1]


_LIMITS: dict[Any, tuple[int, int]] = {}
_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _uniform(base: np.ndarray) -> int | None:
    if base.shape[0] == 1 or bool((base == base[0]).all()):
        return int(base[0])
    return None


# lhs - rhs against 0, per signed comparison
_SIGNED_TESTS: dict[str, Callable[[int], bool]] = {
    "create_icmpSLT": lambda d: d < 0, "create_icmpSLE": lambda d: d <= 0,
    "create_icmpSGT": lambda d: d > 0, "create_icmpSGE": lambda d: d >= 0,
}


def _strided_ok(steps: list[tuple[int, int]]) -> bool:
    """Whether (element stride, length) axes address each element at most once."""
    reach = 0
    for st, n in sorted((abs(st), n) for st, n in steps if n > 1):
        if st <= reach:
            return False
        reach += st * (n - 1)
    return True


def _affine_access(memory: _Memory, aff: Any, dtype: np.dtype) -> tuple[str, Any] | None:
    """How to reach the elements of a formula pointer block in one argument storage:
    ("strided", a view of the storage with the block's shape) when instances are evenly spaced and
    every lane lies inside; ("shared", such a view) when lanes share elements (read, not written);
    ("grid", a view with an axis per instance axis) for instances on a grid (heads by chunks), or
    ("grid_shared", such a view) where instances share elements (read, not written);
    ("rows", (a 2-d view of the storage, a row per instance...)) for scattered instances whose blocks
    are runs of consecutive elements at one phase (cache slots); ("index", element indices) for other
    scattered instances; ("edge", (view, rows, first, end, others,
    their indices)) when evenly spaced instances [first, end) lie inside and the others have lanes
    outside, which only a mask may allow; None otherwise (the address path decides)."""
    base, strides, shape = aff
    size = dtype.itemsize
    if not memory.starts:
        return None
    lane_lo = sum(min(0, st * (n - 1)) for st, n in zip(strides, shape))
    # the storage is the one holding a middle instance's first lane (edge instances may lie outside)
    i = bisect.bisect_right(memory.starts, int(base[base.shape[0] // 2])) - 1
    if i < 0:
        return None
    start = memory.starts[i]
    if start % size or any(st % size for st in strides):
        return None
    rel0 = int(base[0]) - start
    if rel0 % size:
        return None
    r0 = rel0 // size
    nb = base.shape[0]
    info = _instance_pattern(base, size) if nb > 1 else _ONE_INSTANCE
    if info is None:
        return None
    pattern, step, even, pmin, pmax, axes = info
    rel = pattern + r0
    steps = [st // size for st in strides]
    view = memory._view(i, dtype)
    lo = r0 + pmin + sum(min(0, st * (n - 1)) for st, n in zip(steps, shape))
    hi = r0 + pmax + sum(max(0, st * (n - 1)) for st, n in zip(steps, shape))
    inside = lo >= 0 and hi < view.shape[0]
    if not inside:
        if not even or nb == 1:
            return None
        elo = lane_lo // size
        ehi = _affine_extent((rel[:1], tuple(steps), shape))[1] - int(rel[0])
        rows = np.flatnonzero((rel + elo >= 0) & (rel + ehi < view.shape[0]))
        if rows.size == 0 or int(rows[-1]) - int(rows[0]) + 1 != rows.size:
            return None
        first, end = int(rows[0]), int(rows[-1]) + 1
        region = _strided(view, int(rel[first]), (end - first,) + shape,
                          (step * size,) + tuple(st * size for st in steps))
        others = np.concatenate([np.arange(first), np.arange(end, nb)])
        writable = _strided_ok([(step, nb)] + list(zip(steps, shape)))
        return "edge", (view, region, first, end, others, _form((rel[others], tuple(steps), shape),
                                                                np.dtype(np.int64)), writable, rel, steps)
    if even:
        first = int(rel[0])
        region = _strided(view, first, (nb,) + shape, (step * size,) + tuple(st * size for st in steps))
        if _strided_ok([(step, nb)] + list(zip(steps, shape))):
            return "strided", region
        return "shared", (region, view, rel, steps)  # lanes share elements: written by index
    if axes is not None:  # instances on a grid (heads by chunks by blocks): one view, an axis each
        region = _strided(view, int(rel[0]), tuple(n for n, _ in axes) + shape,
                          tuple(st * size for _, st in axes) + tuple(st * size for st in steps))
        STATS["grid_accesses"] += 1
        # instances that share elements (reading the same rows) may read through it, not write
        if _strided_ok([(st, n) for n, st in axes] + list(zip(steps, shape))):
            return "grid", region
        return "grid_shared", region
    block = math.prod(shape) if shape else 1
    if block > 1 and _contiguous(steps, shape):
        # each instance's block is a run of `block` elements, all at one phase: rows of a 2-d view
        phase = int(rel[0]) % block
        if not ((rel - phase) % block).any():
            rows = view[phase:phase + (view.shape[0] - phase) // block * block].reshape(-1, block)
            STATS["row_accesses"] += 1
            return "rows", (rows, (rel - phase) // block, view, rel, steps)
    return "index", (view, _form((rel, tuple(steps), shape), np.dtype(np.int64)))


def _contiguous(steps: list[int], shape: tuple[int, ...]) -> bool:
    """Whether a block's lanes, in order, are consecutive elements."""
    expected = 1
    for st, n in zip(reversed(steps), reversed(shape)):
        if n > 1 and st != expected:
            return False
        expected *= n
    return True


def _strided(view: np.ndarray, first: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The elements of `view` from index `first` with these byte strides (every one inside `view`)."""
    return np.ndarray(shape, view.dtype, buffer=view, offset=first * view.itemsize, strides=strides)


_ONE_INSTANCE = (np.zeros(1, dtype=np.int64), 0, True, 0, 0, None)
_PATTERNS: dict[tuple[bytes, int], Any] = {}


def _instance_pattern(base: np.ndarray, size: int) -> tuple[np.ndarray, int, bool, int, int, Any] | None:
    """How the instances' first lanes lie relative to the first instance's, in elements of `size` bytes:
    (offsets, first step, evenly spaced, least, greatest, grid axes or None), or None where an offset is
    not a whole element. Launches of a kernel repeat a few patterns: each is worked out once."""
    rel = base - base[0]
    key = (rel.tobytes(), size)
    info = _PATTERNS.get(key, False)
    if info is False:
        if (rel % size).any():
            info = None
        else:
            rel //= size
            step = int(rel[1])
            even = bool((np.diff(rel) == step).all())
            info = (rel, step, even, int(rel.min()), int(rel.max()), None if even else _instance_axes(rel))
        if len(_PATTERNS) > 512:
            _PATTERNS.clear()
        _PATTERNS[key] = info
    return info


def _instance_axes(rel: np.ndarray) -> list[tuple[int, int]] | None:
    """[(n, stride)...], outermost first, with rel == rel[0] + sum_k stride_k * i_k over the grid of the
    axes in row-major order (2 to 4 axes, each of 2 or more), else None."""
    if rel.shape[0] < 4:
        return None
    axes: list[tuple[int, int]] = []
    cur = rel
    while cur.shape[0] > 1:
        steps = np.diff(cur)
        st = int(steps[0])
        breaks = np.flatnonzero(steps != st)
        n = int(breaks[0]) + 1 if breaks.size else cur.shape[0]
        if n < 2 or cur.shape[0] % n or len(axes) == 4:
            return None
        rows = cur.reshape(-1, n)
        if not np.array_equal(rows, rows[:, :1] + st * np.arange(n, dtype=rows.dtype)):
            return None
        axes.append((n, st))
        cur = rows[:, 0]
    return axes[::-1] if len(axes) > 1 else None


def _extent(data: np.ndarray) -> tuple[int, int]:
    base = data
    while base.base is not None and isinstance(base.base, np.ndarray) and base.base.size < base.size:
        base = base.base  # a broadcast: its source holds the same values, fewer times
    if base.size == 0:
        return 0, 0
    return int(base.min()), int(base.max())


def _check_overflow(lhs: Any, rhs: Any, op: str, lo: int, hi: int, msg: str) -> None:
    la, ra = _aff(lhs), _aff(rhs)
    (amin, amax) = _hext(lhs) if la is not None else _extent(lhs.data)
    (bmin, bmax) = _hext(rhs) if ra is not None else _extent(rhs.data)
    if op == "add":
        bounds = (amin + bmin, amax + bmax)
    elif op == "sub":
        bounds = (amin - bmax, amax - bmin)
    else:
        corners = (amin * bmin, amin * bmax, amax * bmin, amax * bmax)
        bounds = (min(corners), max(corners))
    if lo <= bounds[0] and bounds[1] <= hi:
        return  # no pair of operands can leave the range
    a, b = _align_raw([lhs.data, rhs.data])
    with np.errstate(over="ignore"):
        ret = _OVERFLOW_OPS[op](a.astype(np.int64), b.astype(np.int64))
    if ret.size and (int(ret.max()) > hi or int(ret.min()) < lo):
        raise AssertionError(msg)


_OVERFLOW_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _semantic_class() -> type:
    from triton.language.semantic import TritonSemantic

    class BatchedSemantic(TritonSemantic):  # type: ignore[misc, valid-type]
        """The interpreter's integer overflow check as one operation rather than a dozen."""

        def binary_op_sanitize_overflow_impl(self, lhs: Any, rhs: Any, binary_op: Any) -> None:
            if lhs.type.scalar.int_bitwidth >= 64 or not self.builder.options.sanitize_overflow:
                return
            name = getattr(binary_op, "__name__", "")
            if name not in _OVERFLOW_OPS:
                return super().binary_op_sanitize_overflow_impl(lhs, rhs, binary_op)
            ty = lhs.type.scalar
            _emit(_check_overflow, lhs.handle, rhs.handle, name, ty.get_int_min_value(), ty.get_int_max_value(),
                  f"int{ty.int_bitwidth} overflow detected for operation {name}")

    return BatchedSemantic


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
            return partial(_elementwise, self._base, name)
        if name in _ATOMICS:
            run = self.run
            if run is not None and run.launch_instances > 1:
                raise BatchedFallback("atomics across instances: exact interpreter")
            if run is not None:
                run.irreversible = True
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

    def _affine(self, base: np.ndarray, strides: tuple[int, ...], shape: tuple[int, ...], np_dtype: np.dtype,
                dtype: Any) -> Any:
        run = self.run
        if run is not None and shape:
            per = math.prod(shape)
            if per > run.max_elements:
                run.max_elements = per
        cls = _AFFINE_CLS[0] if _AFFINE_CLS else _affine_class()
        return cls(base, strides, shape, np_dtype if isinstance(np_dtype, np.dtype) else np.dtype(np_dtype), dtype)

    # -- index arithmetic as formulas ---------------------------------------------------------------

    def create_add(self, lhs: Any, rhs: Any) -> Any:
        return self._sum(lhs, rhs, 1, "create_add")

    def create_sub(self, lhs: Any, rhs: Any) -> Any:
        return self._sum(lhs, rhs, -1, "create_sub")

    def _sum(self, lhs: Any, rhs: Any, sign: int, name: str) -> Any:
        a, b = _aff(lhs), _aff(rhs)
        if a is not None and b is not None and a[2] == b[2] and lhs.np_dtype == rhs.np_dtype \
                and lhs.np_dtype in _AFFINE_INTS:
            return self._affine(a[0] + sign * b[0], tuple(x + sign * y for x, y in zip(a[1], b[1])), a[2],
                                lhs.np_dtype, lhs.dtype)
        return _elementwise(self._base, name, lhs, rhs)

    def create_mul(self, lhs: Any, rhs: Any) -> Any:
        a, b = _aff(lhs), _aff(rhs)
        if a is not None and b is not None and a[2] == b[2] and lhs.np_dtype == rhs.np_dtype \
                and lhs.np_dtype in _AFFINE_INTS:
            for x, y, h in ((a, b, lhs), (b, a, rhs)):
                c = _uniform(y[0]) if not any(y[1]) else None
                if c is not None:
                    return self._affine(x[0] * c, tuple(st * c for st in x[1]), x[2], h.np_dtype, h.dtype)
        return _elementwise(self._base, "create_mul", lhs, rhs)

    def create_srem(self, lhs: Any, rhs: Any) -> Any:
        """`offsets % n` where every offset already lies in [0, n) (the tutorials' wrap of a block's rows
        into the matrix, away from its edge): the offsets unchanged, still a formula."""
        a, b = _aff(lhs), _aff(rhs)
        if a is not None and b is not None and a[2] == b[2] and lhs.np_dtype == rhs.np_dtype \
                and lhs.np_dtype in _AFFINE_INTS and not any(b[1]):
            c = _uniform(b[0])
            if c is not None and c > 0:
                lo, hi = _hext(lhs)
                if 0 <= lo and hi < c:
                    return self._affine(a[0], a[1], a[2], lhs.np_dtype, lhs.dtype)
        return _elementwise(self._base, "create_srem", lhs, rhs)

    def _compare(self, name: str, lhs: Any, rhs: Any) -> Any:
        """A signed comparison of two formulas that comes out the same in every lane (a block's mask
        away from the edge): a constant, without forming either side."""
        a, b = _aff(lhs), _aff(rhs)
        if a is not None and b is not None and a[2] == b[2] and lhs.np_dtype == rhs.np_dtype \
                and lhs.np_dtype in _AFFINE_INTS and _hfits(lhs, lhs.np_dtype) and _hfits(rhs, rhs.np_dtype):
            lo, hi = _affine_extent((a[0] - b[0], tuple(x - y for x, y in zip(a[1], b[1])), a[2]))
            test = _SIGNED_TESTS[name]
            if test(lo) == test(hi):  # the difference is monotone between its extremes
                n = max(a[0].shape[0], b[0].shape[0])
                STATS["constant_compares"] += 1
                return self._handle(np.broadcast_to(np.bool_(test(lo)), (n,) + a[2]), _tl().int1)
        if a is not None and b is not None and max(a[0].shape[0], b[0].shape[0]) > 1:
            # formulas the same for every instance (a column test of a block): compared once, for all
            ua, ub = _uniform(a[0]), _uniform(b[0])
            if ua is not None and ub is not None:
                lhs = self._affine(a[0][:1], a[1], a[2], lhs.np_dtype, lhs.dtype)
                rhs = self._affine(b[0][:1], b[1], b[2], rhs.np_dtype, rhs.dtype)
        return _elementwise(self._base, name, lhs, rhs)

    def create_and(self, lhs: Any, rhs: Any) -> Any:
        return self._logical("create_and", lhs, rhs)

    def create_or(self, lhs: Any, rhs: Any) -> Any:
        return self._logical("create_or", lhs, rhs)

    def _logical(self, name: str, lhs: Any, rhs: Any) -> Any:
        """`&` and `|` of masks where one side has one value in every lane (a constant comparison): that
        side decides, or the other side is the answer, broadcast; so the mask stays a broadcast."""
        a, b = lhs.data, rhs.data
        if a.dtype == np.bool_ and b.dtype == np.bool_ and a.size and b.size and \
                (not any(a.strides) or not any(b.strides)):
            a, b = _align_raw([a, b])
            shape = np.broadcast_shapes(a.shape, b.shape)
            const, other = (a, b) if not any(a.strides) else (b, a)
            value = bool(const.flat[0])
            if value == (name == "create_or"):  # x | True, x & False: the constant
                out = const.reshape((1,) * const.ndim)
            else:  # x | False, x & True: x
                out = other
            return self._handle(np.broadcast_to(out, shape), lhs.dtype.scalar)
        return _elementwise(self._base, name, lhs, rhs)

    def create_select(self, cond: Any, lhs: Any, rhs: Any) -> Any:
        c = cond.data
        if c.size and not any(c.strides) and lhs.data.dtype == rhs.data.dtype:  # one outcome in every lane
            arrays = _align_raw([c, lhs.data, rhs.data])
            shape = np.broadcast_shapes(*(x.shape for x in arrays))
            STATS["constant_selects"] += 1
            return self._handle(np.broadcast_to(arrays[1] if c.flat[0] else arrays[2], shape), lhs.dtype.scalar)
        u = _UINTS.get(lhs.data.dtype.itemsize)
        if c.dtype == np.bool_ and lhs.data.dtype == rhs.data.dtype and u is not None and c.size:
            # np.where's bits, chosen without a branch per lane: rhs ^ ((lhs ^ rhs) & all-ones-where-cond)
            c, a, b = _align_raw([c, lhs.data, rhs.data])
            ones = np.multiply(c, u(np.iinfo(u).max), dtype=u)
            t = np.bitwise_and(np.bitwise_xor(a.view(u), b.view(u)), ones)
            t = np.bitwise_xor(t, b.view(u), out=t if t.shape == np.broadcast_shapes(t.shape, b.shape) else None)
            STATS["branchless_selects"] += 1
            return self._handle(t.view(lhs.data.dtype), rhs.dtype.scalar)
        return _elementwise(self._base, "create_select", cond, lhs, rhs)

    def create_icmpSLT(self, lhs: Any, rhs: Any) -> Any:
        return self._compare("create_icmpSLT", lhs, rhs)

    def create_icmpSLE(self, lhs: Any, rhs: Any) -> Any:
        return self._compare("create_icmpSLE", lhs, rhs)

    def create_icmpSGT(self, lhs: Any, rhs: Any) -> Any:
        return self._compare("create_icmpSGT", lhs, rhs)

    def create_icmpSGE(self, lhs: Any, rhs: Any) -> Any:
        return self._compare("create_icmpSGE", lhs, rhs)

    def create_int_cast(self, src: Any, dst_type: Any, is_signed: bool) -> Any:
        a = _aff(src)
        if a is not None and src.np_dtype in _AFFINE_INTS:
            np_dtype = np.dtype(_interp()._get_np_dtype(dst_type))
            if np_dtype in _AFFINE_INTS and _hfits(src, src.np_dtype) and _hfits(src, np_dtype):
                return self._affine(a[0], a[1], a[2], np_dtype, dst_type.scalar)
        return _elementwise(self._base, "create_int_cast", src, dst_type, is_signed)

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
        return self._affine(np.array([start], dtype=np.int64), (1,), (stop - start,), np.dtype(np.int32),
                            _tl().int32)

    # -- pointers -----------------------------------------------------------------------------------

    def create_addptr(self, ptr: Any, offset: Any) -> Any:
        a, b = _aff(ptr), _aff(offset)
        if a is not None and b is not None and a[2] == b[2] and ptr.np_dtype == np.uint64 \
                and offset.np_dtype in _AFFINE_INTS and _hfits(offset, offset.np_dtype):
            size = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
            out = self._affine(a[0] + b[0] * size, tuple(x + y * size for x, y in zip(a[1], b[1])), a[2],
                               ptr.np_dtype, ptr.dtype)
            if _ALIGNED in ptr.attr:
                out.attr[_ALIGNED] = True
            return out
        ptr, offset = _align([ptr, offset])
        if ptr.data.dtype != np.uint64 or offset.data.dtype.kind not in "iu":
            out = self._base.create_addptr(ptr, offset)
        else:
            # the interpreter's uint64 sum, computed in int64: the same bits modulo 2**64, in fewer passes
            size = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
            off = offset.data.astype(np.int64)
            if size != 1:
                off *= size
            data = np.add(ptr.data.view(np.int64), off).view(np.uint64)
            out = _interp().TensorHandle(data, ptr.dtype)
        if _ALIGNED in ptr.attr and offset.data.dtype.kind in "iu":
            out.attr[_ALIGNED] = True
        return out

    # -- shapes -------------------------------------------------------------------------------------

    def create_splat(self, ret_ty: Any, arg: Any) -> Any:
        shape = tuple(ret_ty.shape)
        np_dtype = np.dtype(_interp()._get_np_dtype(arg.dtype))
        data = arg.data
        if data.ndim == 1 and data.dtype == np_dtype and (np_dtype in _AFFINE_INTS or np_dtype == np.uint64) \
                and (np_dtype != np.uint64 or isinstance(arg.dtype, _tl().pointer_type)):
            base = data.view(np.int64) if np_dtype == np.uint64 else data.astype(np.int64)
            return _keep_aligned(arg, self._affine(base, (0,) * len(shape), shape, np_dtype, arg.dtype.scalar))
        n = data.shape[0]
        scalar = data.reshape(n, -1)[:, :1].reshape((n,) + (1,) * len(shape))
        return _keep_aligned(arg, self._handle(np.broadcast_to(scalar.astype(np_dtype, copy=False), (n,) + shape), arg.dtype.scalar))

    def create_unsplat(self, arg: Any) -> Any:
        data = arg.data
        return self._handle(np.ascontiguousarray(data.reshape(data.shape[0], -1)[:, 0]), arg.dtype.scalar)

    def create_broadcast(self, arg: Any, shape: list[int]) -> Any:
        a = _aff(arg)
        if a is not None and len(a[2]) == len(shape) and all(o in (1, n) for o, n in zip(a[2], shape)):
            strides = tuple(st if o == n else 0 for st, o, n in zip(a[1], a[2], shape))
            return _keep_aligned(arg, self._affine(a[0], strides, tuple(shape), arg.np_dtype, arg.dtype))
        data = arg.data
        return _keep_aligned(arg, self._handle(np.broadcast_to(data, (data.shape[0],) + tuple(shape)), arg.dtype.scalar))

    def create_expand_dims(self, arg: Any, axis: int) -> Any:
        a = _aff(arg)
        if a is not None:
            r = len(a[2])
            at = axis if axis >= 0 else r + 1 + axis
            if 0 <= at <= r:
                return _keep_aligned(arg, self._affine(a[0], a[1][:at] + (0,) + a[1][at:], a[2][:at] + (1,) + a[2][at:],
                                                       arg.np_dtype, arg.dtype))
        return _keep_aligned(arg, self._handle(np.expand_dims(arg.data, axis + 1 if axis >= 0 else axis), arg.dtype.scalar))

    def create_reshape(self, arg: Any, shape: list[int], allow_reorder: bool) -> Any:
        data = arg.data
        return _keep_aligned(arg, self._handle(data.reshape((data.shape[0],) + tuple(shape)), arg.dtype.scalar))

    def create_trans(self, arg: Any, perm: list[int]) -> Any:
        return _keep_aligned(arg, self._handle(np.transpose(arg.data, (0,) + tuple(p + 1 for p in perm)), arg.dtype.scalar))

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
        if _bf16.is_bf16(a.dtype) or _bf16.is_bf16(b.dtype):  # as the route's interpreter multiplies bf16
            a_data = _bf16.to_f32(a_data) if _bf16.is_bf16(a.dtype) else a_data
            b_data = _bf16.to_f32(b_data) if _bf16.is_bf16(b.dtype) else b_data
        elif (a.dtype.primitive_bitwidth == 8 and a.dtype.is_floating()) or \
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

    def _narrowed(self, ptrs: Any, a: Any, mask: Any) -> tuple[Any, tuple[slice, ...]] | None:
        """A formula pointer block under a mask that keeps the same box of lanes in every instance (a row's
        columns below its length): the pointer block of those lanes, and their slices."""
        # a mask made from program ids and scalars is reused across replays: its box is found once
        known = mask.__dict__.get("_cudashim_box")
        if known is not None and known[0] is mask.data and known[1] == a[2]:
            box = known[2]
        else:
            box = _mask_box(a, mask.data)
            mask.__dict__["_cudashim_box"] = (mask.data, a[2], box)
        if box is None:
            return None
        STATS["boxed_masks"] += 1
        base, strides, shape = a
        lo = [s.start for s in box]
        narrowed = self._affine(base + sum(st * x for st, x in zip(strides, lo)), strides,
                                tuple(s.stop - s.start for s in box), ptrs.np_dtype, ptrs.dtype)
        return _keep_aligned(ptrs, narrowed), box

    def create_masked_load(self, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: bool) -> Any:
        ip = _interp()
        dtype_tt = ptrs.get_element_ty()
        dtype_np = ip._get_np_dtype(dtype_tt)
        a = _aff(ptrs)
        run = self.run
        if a is not None and mask is not None and (other is None or other.data.dtype == dtype_np):
            narrowed = self._narrowed(ptrs, a, mask)
            if narrowed is not None:  # the kept lanes unmasked, the others `other`
                p, box = narrowed
                inner = None
                nb_box = p.aff[0].shape[0]
                if run is not None and run.memory is not None:  # a view of the kept lanes, copied once below
                    found_box = _affine_access(run.memory, p.aff, np.dtype(dtype_np))
                    if found_box is not None and found_box[0] in ("strided", "shared", "grid", "grid_shared"):
                        inner = _formula_values(found_box[0], found_box[1], None, (nb_box,) + p.aff[2],
                                                np.dtype(dtype_np))
                        STATS["formula_loads"] += 1
                if inner is None:
                    inner = self.create_masked_load(p, None, None, cache_policy, is_volatile).data
                extra = _align_raw([np.empty((1,) * (len(a[2]) + 1)), mask.data] +
                                   ([other.data] if other is not None else []))[1:]
                shape = np.broadcast_shapes((a[0].shape[0],) + a[2], *(x.shape for x in extra))
                if len(shape) == len(a[2]) + 1:
                    data = np.empty(shape, dtype_np)
                    fill = np.broadcast_to(extra[-1], shape) if other is not None else np.zeros((), dtype_np)
                    if len(box) == 1:  # only the lanes outside the kept slice take `other`
                        lo, hi = box[0].start, box[0].stop
                        data[:, :lo] = fill[:, :lo] if fill.ndim else fill
                        data[:, hi:] = fill[:, hi:] if fill.ndim else fill
                    else:
                        data[...] = fill
                    data[(slice(None),) + box] = inner
                    return self._handle(data, dtype_tt)
        if a is not None and run is not None and run.memory is not None:
            found_a = _affine_access(run.memory, a, np.dtype(dtype_np))
            if found_a is not None:
                kind, where = found_a
                extra = [x.data for x in (mask, other) if x is not None]
                top = max([len(a[2]) + 1] + [x.ndim for x in extra])
                extra = _align_raw([np.empty((1,) * (len(a[2]) + 1))] + extra)[1:]
                shape = np.broadcast_shapes((a[0].shape[0],) + a[2], *(x.shape for x in extra))
                if len(shape) == top:
                    m = np.broadcast_to(extra[0], shape) if mask is not None else None
                    o = np.broadcast_to(extra[-1], shape) if other is not None else None
                    values = _formula_values(kind, where, m, shape, np.dtype(dtype_np))
                    if values is not None:
                        STATS["formula_loads"] += 1
                        if m is not None and not _all(m):
                            data = np.where(m, values, o if o is not None else np.zeros((), dtype_np))
                        elif values.shape == shape:  # a new array: gathered already, or a view copied
                            data = values if kind in ("grid", "grid_shared", "index", "rows") and values.base is None \
                                else values.copy()
                        else:
                            data = np.array(np.broadcast_to(values, shape))
                        return self._handle(data, dtype_tt)
        arrays = _align_raw([ptrs.data] + ([mask.data] if mask is not None else [])
                            + ([other.data] if other is not None else []))
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        p = np.broadcast_to(arrays[0], shape)
        m = np.broadcast_to(arrays[1], shape) if mask is not None else None
        o = np.broadcast_to(arrays[-1], shape) if other is not None else None
        run = self.run
        found = run.memory.locate(p, m, dtype_np, _ALIGNED in ptrs.attr) if run is not None else None
        if found is not None:
            view, idx, inside = found
            if m is not None and not _all(m):
                data = np.where(m, view.take(idx) if inside else view.take(idx, mode="clip"),
                                o if o is not None else np.zeros((), dtype_np))
            else:
                data = view.take(idx)
            return self._handle(data, dtype_tt)
        m = m if m is not None else np.ones(shape, dtype=bool)
        o = o if o is not None else np.zeros(shape, dtype=dtype_np)
        return self._handle(ip._interpreter.load(p, m, o, dtype_np), dtype_tt)

    def create_masked_store(self, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        ip = _interp()
        a = _aff(ptrs)
        run = self.run
        if a is not None and mask is not None and value.data.ndim <= len(a[2]) + 1:
            narrowed = self._narrowed(ptrs, a, mask)
            if narrowed is not None:  # the kept lanes stored unmasked, the others left alone
                p, box = narrowed
                v = _align_raw([np.empty((1,) * (len(a[2]) + 1)), value.data])[1]
                v = np.broadcast_to(v, (v.shape[0],) + a[2])[(slice(None),) + box]
                return self.create_masked_store(p, _interp().TensorHandle(v, value.dtype), None, cache_policy)
        if a is not None and run is not None and run.memory is not None:
            found_a = _affine_access(run.memory, a, value.data.dtype)
            if found_a is not None and found_a[0] == "edge":
                if self._edge_store(found_a[1], a, value, mask):
                    STATS["formula_stores"] += 1
                    return None
                view, rel, steps = found_a[1][0], found_a[1][7], found_a[1][8]
                found_a = ("edge_index", (view, _form((rel, tuple(steps), a[2]), np.dtype(np.int64))))
            elif found_a is not None and found_a[0] == "shared":
                _, view, rel, steps = found_a[1]
                found_a = ("index", (view, _form((rel, tuple(steps), a[2]), np.dtype(np.int64))))
            if found_a is not None and found_a[0] in ("index", "edge_index"):  # by index, as below
                view, idx = found_a[1]
                arrays = _align_raw([idx, value.data] + ([mask.data] if mask is not None else []))
                if arrays[0].ndim == idx.ndim:
                    shape = np.broadcast_shapes(*(x.shape for x in arrays))
                    idx = np.broadcast_to(idx, shape)
                    v = np.broadcast_to(arrays[1], shape)
                    m = np.broadcast_to(arrays[2], shape) if mask is not None else None
                    if m is not None and not _all(m):
                        idx, v = idx[m], v[m]
                    if found_a[0] == "index" or not (np.asarray(idx).view(np.uint64) >= view.shape[0]).any():
                        if run.undo_free:
                            run.irreversible = True
                        else:
                            run.undo.append(partial(_put, view, idx, view.take(idx)))
                        view[idx] = v
                        STATS["formula_stores"] += 1
                        return None
            if found_a is not None and found_a[0] == "rows":
                rows, which, view, rel, steps = found_a[1]
                full = (a[0].shape[0],) + a[2]
                extra = _align_raw([np.empty((1,) * (len(a[2]) + 1)), value.data] +
                                   ([mask.data] if mask is not None else []))[1:]
                if value.data.dtype == rows.dtype and (mask is None or _all(np.broadcast_to(extra[1], full))):
                    try:
                        v = np.broadcast_to(extra[0], full).reshape(full[0], -1)
                    except ValueError:
                        v = None
                    if v is not None:  # whole rows, in instance order (a repeated row: the last one stays)
                        if run.undo_free:
                            run.irreversible = True
                        else:
                            run.undo.append(partial(_put, rows, which, rows[which]))
                        rows[which] = v
                        STATS["formula_stores"] += 1
                        return None
                found_a = ("index", (view, _form((rel, tuple(steps), a[2]), np.dtype(np.int64))))
            if found_a is not None and found_a[0] == "grid" and value.data.dtype == found_a[1].dtype:
                region = found_a[1]
                full = (a[0].shape[0],) + a[2]
                extra = _align_raw([np.empty((1,) * (len(a[2]) + 1)), value.data] +
                                   ([mask.data] if mask is not None else []))[1:]
                try:
                    v = np.broadcast_to(extra[0], full).reshape(region.shape)
                    m = np.broadcast_to(extra[1], full).reshape(region.shape) if mask is not None else None
                except ValueError:
                    v = None
                if v is not None:
                    if run.undo_free:
                        run.irreversible = True
                    else:
                        run.undo.append(partial(np.copyto, region, region.copy()))
                    np.copyto(region, v, casting="no", where=m if m is not None else True)
                    STATS["formula_stores"] += 1
                    return None
                found_a = None
            if found_a is not None and found_a[0] == "strided":
                region = found_a[1]
                extra = [value.data] + ([mask.data] if mask is not None else [])
                if max(x.ndim for x in extra) <= len(a[2]) + 1:
                    extra = _align_raw([region] + extra)[1:]
                    shape = np.broadcast_shapes(region.shape, *(x.shape for x in extra))
                    if shape == region.shape:  # each lane one element, written once
                        if run.undo_free:
                            run.irreversible = True
                        else:
                            run.undo.append(partial(np.copyto, region, region.copy()))
                        if mask is None:
                            np.copyto(region, extra[0], casting="no")
                        else:
                            np.copyto(region, extra[0], casting="no", where=extra[1])
                        STATS["formula_stores"] += 1
                        return None
        arrays = _align_raw([ptrs.data, value.data] + ([mask.data] if mask is not None else []))
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        p = np.broadcast_to(arrays[0], shape)
        v = np.broadcast_to(arrays[1], shape)
        m = np.broadcast_to(arrays[2], shape) if mask is not None else None
        run = self.run
        found = run.memory.locate(p, m, v.dtype, _ALIGNED in ptrs.attr) if run is not None else None
        if found is not None:
            view, idx, _ = found
            if m is not None and not _all(m):
                idx, v = idx[m], v[m]
            if run.undo_free:
                run.irreversible = True
            else:
                old = view.take(idx)
                run.undo.append(partial(_put, view, idx, old))
            view[idx] = v
            return None
        m = m if m is not None else np.ones(shape, dtype=bool)
        if run is not None:
            old = ip._interpreter.load(p, m, np.zeros(shape, dtype=v.dtype), v.dtype)
            run.undo.append(partial(ip._interpreter.store, p, old, m))
        return ip._interpreter.store(p, v, m)

    def _edge_store(self, edge: Any, aff: Any, value: Any, mask: Any) -> bool:
        """A store through evenly spaced rows of which the ones at the storage's edge have lanes outside
        it: the inner rows as one view, the edge rows by index; False (nothing written) when a lane
        outside is not masked off."""
        run = self.run
        assert run is not None
        view, region, first, end, others, idx, writable = edge[:7]
        if not writable or mask is None or value.data.dtype != view.dtype:
            return False
        full = (aff[0].shape[0],) + aff[2]
        v, m = _align_raw([region, value.data, mask.data])[1:]
        try:
            v, m = np.broadcast_to(v, full), np.broadcast_to(m, full)
        except ValueError:
            return False
        m_out, v_out = m[others], v[others]
        inside = (idx >= 0) & (idx < view.shape[0])
        if (m_out & ~inside).any():
            return False
        idx, v_out = idx[m_out], v_out[m_out]
        if run.undo_free:
            run.irreversible = True
        else:
            run.undo.append(partial(np.copyto, region, region.copy()))
            run.undo.append(partial(_put, view, idx, view.take(idx)))
        np.copyto(region, v[first:end], casting="no", where=m[first:end])
        view[idx] = v_out
        return True

    # -- what cannot be batched ---------------------------------------------------------------------

    def create_print(self, *args: Any) -> Any:
        raise BatchedFallback("unsupported op device_print (output per instance): exact interpreter")


def _all(m: np.ndarray) -> bool:
    if m.size and not any(m.strides):  # one value broadcast (a constant mask): that value
        return bool(m.flat[0])
    return bool(m.all())


def _mask_box(aff: Any, m: np.ndarray) -> tuple[slice, ...] | None:
    """The lanes a mask keeps, where it keeps the same box of lanes (a slice per block axis, not empty,
    not the whole block) in every instance, else None."""
    shape = aff[2]
    r = len(shape)
    if m.ndim != r + 1 or (m.shape[0] != 1 and m.strides[0] != 0) or r == 0 or not any(m.strides):
        return None
    try:
        m0 = np.broadcast_to(m[0], shape)
    except ValueError:
        return None
    box = []
    for d in range(r):
        kept = np.flatnonzero(np.any(m0, axis=tuple(i for i in range(r) if i != d)))
        if kept.size == 0:
            return None
        box.append(slice(int(kept[0]), int(kept[-1]) + 1))
    if math.prod(s.stop - s.start for s in box) in (0, m0.size) or \
            int(np.count_nonzero(m0)) != math.prod(s.stop - s.start for s in box):
        return None
    return tuple(box)


def _formula_values(kind: str, where: Any, m: np.ndarray | None, shape: tuple[int, ...],
                    dtype: np.dtype) -> np.ndarray | None:
    """The elements a formula load reads (lanes masked off: any value), or None where a lane outside
    the storage is not masked off."""
    if kind == "strided":
        return where
    if kind in ("grid", "grid_shared"):  # the instance axes as one
        k = where.ndim - len(shape) + 1 if shape else where.ndim
        return where.reshape((-1,) + where.shape[k:])
    if kind == "shared":
        return where[0]
    if kind == "rows":
        rows, which = where[0], where[1]
        return rows[which].reshape(shape)
    if kind == "index":
        view, idx = where
        return view.take(idx)
    view, region, first, end, others, idx = where[:6]
    if m is None or shape[0] != region.shape[0] + others.shape[0]:
        return None
    inside = (idx >= 0) & (idx < view.shape[0])
    if (m[others] & ~inside).any():
        return None
    values = np.empty((shape[0],) + region.shape[1:], dtype)
    values[first:end] = region
    values[others] = view.take(idx, mode="clip")
    return values


def _align_raw(arrays: list[np.ndarray]) -> list[np.ndarray]:
    top = max(a.ndim for a in arrays)
    return [a.reshape(a.shape + (1,) * (top - a.ndim)) for a in arrays]


def _batch_broadcast(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = max(a.shape[0], b.shape[0])
    return (np.broadcast_to(a, (n,) + a.shape[1:]), np.broadcast_to(b, (n,) + b.shape[1:]))


def _tl() -> Any:
    if not _MODULES:
        _interp()
    return _MODULES[1]


# -- reductions and scans -----------------------------------------------------------------------------
#
# Each numeric step is a function of handles (so that it can be taped); the language tensors around
# them are made here.


def _typed(h: Any, dtype: Any) -> Any:
    tl = _tl()
    data = h.data
    return tl.core.tensor(h, tl.block_type(dtype, list(data.shape[1:])) if data.ndim > 1 else dtype)


def _as_handle(data: Any, dtype: Any) -> Any:
    ip = _interp()
    return ip.TensorHandle(np.asarray(data).astype(ip._get_np_dtype(dtype)), dtype.scalar)


def _prepared(h: Any, axis: int | None) -> tuple[np.ndarray, int]:
    data = h.data
    if data.ndim == 1:
        data = data[:, None]
    if axis is None:
        return np.ascontiguousarray(data).reshape(data.shape[0], -1), 1
    return data, axis + 1 if axis >= 0 else axis


def _finished(data: np.ndarray, axis: int | None, ax: int, keep_dims: bool, rank: int) -> np.ndarray:
    if not keep_dims:
        return data
    if axis is None:
        return data.reshape((data.shape[0],) + (1,) * rank)
    return np.expand_dims(data, ax)


def _reduce_fast(kind: str, h: Any, axis: int | None, keep_dims: bool, rank: int, dtype: Any) -> Any:
    tl = _tl()
    data, ax = _prepared(h, axis)
    bf16 = _bf16.is_bf16(dtype)
    if bf16:  # in fp32, rounded back, as the route's interpreter reduces bf16
        data = _bf16.to_f32(data)
    back = _bf16.from_f32 if bf16 else (lambda x: x)
    if kind == "sum":
        out = np.sum(data, axis=ax, dtype=np.float32) if bf16 else np.sum(data, axis=ax)
        return _as_handle(_finished(back(out), axis, ax, keep_dims, rank), dtype)
    if kind in ("max", "min"):
        f = np.nanmax if kind == "max" else np.nanmin
        return _as_handle(_finished(back(f(data, axis=ax)), axis, ax, keep_dims, rank), dtype)
    f, g = (np.nanmax, np.nanargmax) if kind == "argmax" else (np.nanmin, np.nanargmin)
    return (_as_handle(_finished(back(f(data, axis=ax)), axis, ax, keep_dims, rank), dtype),
            _as_handle(_finished(g(data, axis=ax), axis, ax, keep_dims, rank), tl.int32))


def _reduce_slice(h: Any, k: int, axis: int | None, dtype: Any) -> Any:
    data, ax = _prepared(h, axis)
    return _as_handle(np.take(data, k, axis=ax), dtype)


def _reduce_result(h: Any, like: Any, axis: int | None, keep_dims: bool, rank: int, dtype: Any) -> Any:
    _, ax = _prepared(like, axis)
    return _as_handle(_finished(np.asarray(h.data).astype(like.data.dtype, copy=False), axis, ax, keep_dims, rank),
                      dtype)


def _cast_like(h: Any, like: Any, dtype: Any) -> Any:
    return _as_handle(np.asarray(h.data).astype(like.data.dtype, copy=False), dtype)


def _tensor_result(v: Any, like: Any, dtype: Any) -> Any:
    if hasattr(v, "handle"):
        return _typed(_emit(_cast_like, v.handle, like, dtype), dtype)
    raise BatchedFallback("unsupported op: a combine function returning a Python value: exact interpreter")


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

    def _impl(self, input: tuple[Any, ...]) -> Any:
        tl = _tl()
        std = tl.standard
        fn = self.combine_fn
        rank = len(input[0].shape)
        dtype = input[0].dtype
        kind = None
        if fn is std._argmin_combine_tie_break_left or fn is std._argmin_combine_tie_break_fast:
            kind = "argmin"
        elif fn is std._argmax_combine_tie_break_left or fn is std._argmax_combine_tie_break_fast:
            kind = "argmax"
        elif fn is std._elementwise_max:
            kind = "max"
        elif fn is std._elementwise_min:
            kind = "min"
        elif fn is std._sum_combine:
            kind = "sum"
        if kind is not None:
            out = _emit(_reduce_fast, kind, input[0].handle, self.axis, self.keep_dims, rank, dtype)
            if isinstance(out, tuple):
                return _typed(out[0], dtype), _typed(out[1], tl.int32)
            return _typed(out, dtype)
        # any other combine function: a left fold along the axis, as the interpreter folds it
        dtypes = [arg.dtype for arg in input]
        handles = [arg.handle for arg in input]
        length = _prepared(handles[0], self.axis)[0].shape[1 if self.axis is None else self.axis + 1]
        acc = tuple(_typed(_emit(_reduce_slice, h, 0, self.axis, t), t) for h, t in zip(handles, dtypes))
        for k in range(1, length):
            item = tuple(_typed(_emit(_reduce_slice, h, k, self.axis, t), t) for h, t in zip(handles, dtypes))
            ret = fn.fn(*acc, *item)
            ret = ret if isinstance(ret, tuple) else (ret,)
            acc = tuple(_tensor_result(v, a.handle, t) for v, a, t in zip(ret, acc, dtypes))
        return [_typed(_emit(_reduce_result, a.handle, h, self.axis, self.keep_dims, rank, t), t)
                for a, h, t in zip(acc, handles, dtypes)]


def _scan_fast(kind: str, h: Any, axis: int, reverse: bool, dtype: Any) -> Any:
    data = h.data
    if reverse:
        data = np.flip(data, axis=axis)
    out = np.cumsum(data, axis=axis) if kind == "sum" else np.cumprod(data, axis=axis)
    if reverse:
        out = np.flip(out, axis=axis)
    return _as_handle(np.ascontiguousarray(out), dtype)


def _scan_slice(h: Any, k: int, axis: int, reverse: bool, dtype: Any) -> Any:
    data = h.data
    n = data.shape[axis]
    return _as_handle(np.take(data, n - 1 - k if reverse else k, axis=axis), dtype)


def _scan_stack(axis: int, reverse: bool, dtype: Any, *hs: Any) -> Any:
    datas = list(reversed([h.data for h in hs])) if reverse else [h.data for h in hs]
    n = max(d.shape[0] for d in datas)
    datas = [np.broadcast_to(d, (n,) + d.shape[1:]) for d in datas]
    return _as_handle(np.stack(datas, axis=axis), dtype)


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
        handles = [arg.handle for arg in input]
        dtypes = [arg.dtype for arg in input]
        if self.combine_fn == tl.standard._sum_combine or self.combine_fn == tl.standard._prod_combine:
            kind = "sum" if self.combine_fn == tl.standard._sum_combine else "prod"
            return (_typed(_emit(_scan_fast, kind, handles[0], axis, self.reverse, dtypes[0]), dtypes[0]),)
        n = handles[0].data.shape[axis]
        acc = tuple(_typed(_emit(_scan_slice, h, 0, axis, self.reverse, t), t) for h, t in zip(handles, dtypes))
        steps = [acc]
        for k in range(1, n):
            item = tuple(_typed(_emit(_scan_slice, h, k, axis, self.reverse, t), t) for h, t in zip(handles, dtypes))
            ret = self.combine_fn.fn(*acc, *item)
            ret = ret if isinstance(ret, tuple) else (ret,)
            acc = tuple(_tensor_result(v, a.handle, t) for v, a, t in zip(ret, acc, dtypes))
            steps.append(acc)
        return tuple(_typed(_emit(_scan_stack, axis, self.reverse, t, *(step[j].handle for step in steps)), t)
                     for j, t in enumerate(dtypes))


# -- decisions: where Python control flow reads a value ----------------------------------------------


def _decide_bool(h: Any) -> bool:
    data = h.data
    if data.ndim > 1:
        per = data.reshape(data.shape[0], -1)
        if per.shape[1] != 1:
            return True
        data = per[:, 0]
    values = data.astype(bool)
    if values.shape[0] == 1 or values.all() or not values.any():
        return bool(values[0])
    raise _Diverged(values, _where())


def _decide_index(h: Any) -> int:
    data = h.data
    values = data.reshape(data.shape[0], -1)[:, 0] if data.ndim > 1 else data
    if values.shape[0] == 1 or bool((values == values[0]).all()):
        return int(values[0])
    raise _Diverged(values, _where())


def _tensor_bool(self: Any) -> bool:
    return _guard(_decide_bool, self.handle)


def _tensor_index(self: Any) -> int:
    return _guard(_decide_index, self.handle)


def _swap_last(h: Any) -> Any:
    return _interp().TensorHandle(np.swapaxes(h.data, -1, -2), h.dtype)


def _tensor_transpose(self: Any) -> Any:
    tl = _tl()
    shape = list(self.type.shape)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    return tl.core.tensor(_emit(_swap_last, self.handle), tl.core.block_type(self.dtype, shape))


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
    """The interpreter's rewrite of a kernel's body (cached by the interpreter).

    The rewrite copies the interpreter's globals into the kernel's module once: they must be the
    interpreter's own then, not a batched run's stand-ins.
    """
    ip = _interp()
    cache = _REWRITTEN
    if fn not in cache:
        current = ip.interpreter_semantic
        ip.interpreter_semantic = _ORIGINAL_SEMANTIC[0] if _ORIGINAL_SEMANTIC else current
        try:
            # the route's rewrite (a loop's index is a tensor, as compiled), so both executions agree
            from .interpreter import _interpreted_fn

            cache[fn] = _interpreted_fn(_Jit(fn)).rewrite()
        finally:
            ip.interpreter_semantic = current
    return cache[fn]


class _Jit:
    """What the route's rewrite reads of a JITFunction."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


_REWRITTEN: dict[Any, Callable[..., Any]] = {}


_ORIGINAL_SEMANTIC: list[Any] = []
# called with each nested @triton.jit function a traced run enters (the route patches its libdevice names)
_NESTED_HOOKS: list[Callable[[Callable[..., Any]], None]] = []
# called once when a launch first runs the kernel's Python (a replayed launch never does)
_TRACE_HOOKS: list[Callable[[], None]] = []


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
    body = _rewritten(self.fn)
    _GLOBALS.enter(self.fn)
    for hook in _NESTED_HOOKS:
        hook(self.fn)
    return body(*args, **kwargs)


def _bound_values(h: Any) -> np.ndarray:
    data = h.data
    return data.reshape(data.shape[0], -1)[:, 0] if data.ndim > 1 else data


def _uniform_or_none(h: Any) -> int | None:
    values = _bound_values(h)
    if values.shape[0] == 1 or bool((values == values[0]).all()):
        return int(values[0])
    return None


def _trip_count(start: Any, end: Any, step: Any) -> int:
    a, b, c = (np.asarray(_bound_values(v) if hasattr(v, "data") else v, dtype=np.int64) for v in (start, end, step))
    if (c == 0).any():
        raise ValueError("range() arg 3 must not be zero")
    trips = np.where(c > 0, np.maximum(0, (b - a + c - 1) // np.where(c > 0, c, 1)),
                     np.maximum(0, (a - b - c - 1) // np.where(c < 0, -c, 1)))
    trips = np.atleast_1d(trips)
    if not bool((trips == trips[0]).all()):
        raise _Diverged(np.ascontiguousarray(trips), _where())
    return int(trips[0])


def _range_value(start: Any, step: Any, k: int) -> Any:
    tl = _tl()
    a = np.asarray(_bound_values(start) if hasattr(start, "data") else start, dtype=np.int64)
    c = np.asarray(_bound_values(step) if hasattr(step, "data") else step, dtype=np.int64)
    value = np.atleast_1d(a + k * c)
    if value.min() >= -2**31 and value.max() < 2**31:
        return _interp().TensorHandle(value.astype(np.int32), tl.int32)
    return _interp().TensorHandle(value, tl.int64)


def _batched_range(arg1: Any, arg2: Any = None, step: Any = None, **kwargs: Any) -> Any:
    """`range` whose bounds may differ between instances, as long as the trip counts do not.

    Bounds the same for every instance give the interpreter's Python range; otherwise the loop variable
    is a per-instance tensor, and instances with different trip counts are split apart.
    """
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    step = 1 if step is None else step
    parts = [v.handle if hasattr(v, "handle") else int(v) for v in (start, end, step)]
    uniform = [p if isinstance(p, int) else _uniform_or_none(p) for p in parts]
    if all(u is not None for u in uniform):
        for p in parts:
            if not isinstance(p, int):
                _guard(_decide_index, p)
        return range(*uniform)  # type: ignore[arg-type]
    trips = _emit_trips(*parts)
    return _range_values(parts[0], parts[2], trips)


def _range_values(start: Any, step: Any, trips: int) -> Any:
    for k in range(trips):
        h = _emit(_range_value, start, step, k)
        yield _typed(h, h.dtype)


def _emit_trips(start: Any, end: Any, step: Any) -> int:
    trips = _trip_count(start, end, step)
    tape = _STATE.tape
    if tape is not None and tape.broken is None:
        handle_type = _interp().TensorHandle
        try:
            refs = [tape.ref(v, handle_type) for v in (start, end, step)]
        except _Unrecorded:
            tape.broken = "a loop bound made outside the recorded operations"
            return trips
        tape.ops.append((2, _trip_count, refs, {}, trips))
    return trips


_BUILTINS: dict[int, list[tuple[str, Any]]] = {}


def _builtins(pkg: Any) -> list[tuple[str, Any]]:
    """The language builtins of a module or class (listed once: inspecting them is slow)."""
    found = _BUILTINS.get(id(pkg))
    if found is None:
        tl = _tl()
        found = _BUILTINS[id(pkg)] = [(n, m) for n, m in inspect.getmembers(pkg) if tl.core.is_builtin(m)]
    return found


def _patch_builtins(pkg: Any, semantic: Any, scope: Any) -> None:
    for name, member in _builtins(pkg):
        def patched(*args: Any, _member: Any = member, **kwargs: Any) -> Any:
            kwargs.pop("_semantic", None)
            return _member(*args, **kwargs, _semantic=semantic)

        scope.set_attr(pkg, name, patched)


def _reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: bool = False, **kw: Any) -> Any:
    return _Reduce(axis, combine_fn, keep_dims).apply(input)


def _scan(input: Any, axis: Any, combine_fn: Any, reverse: bool = False, **kw: Any) -> Any:
    return _Scan(axis, combine_fn, reverse).apply(input)


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
            for mod in (tl, tl.core):
                scope.set_attr(mod, "reduce", _reduce)
                scope.set_attr(mod, "associative_scan", _scan)
                scope.set_attr(mod, "range", _batched_range)
                scope.set_attr(mod, "static_range", _batched_range)
            scope.set_attr(tl.core.tensor, "__bool__", _tensor_bool)
            scope.set_attr(tl.core.tensor, "__index__", _tensor_index)
            scope.set_attr(tl.core.tensor, "T", property(_tensor_transpose))
            # the rewritten body makes its constants through `interpreter_semantic`, loops through `range`
            _GLOBALS.names = {"range": _batched_range, "interpreter_semantic": semantic}
        else:
            _GLOBALS.names = {}
    except BaseException:
        scope.restore()
        raise
    return scope


# -- arguments, grid ---------------------------------------------------------------------------------


_SIGNATURES: dict[Any, tuple[set[str], set[str]]] = {}


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The kernel's arguments as the interpreter passes them: constexprs as given, the rest converted."""
    ip = _interp()
    sig = _SIGNATURES.get(fn)
    if sig is None:
        from triton.runtime.jit import _normalize_ty

        spec = inspect.getfullargspec(fn)
        annotations = {name: _normalize_ty(ty) for name, ty in inspect.get_annotations(fn).items()}
        sig = _SIGNATURES[fn] = (set(spec.args) | set(spec.kwonlyargs),
                                 {n for n, t in annotations.items() if t == "constexpr"})
    names, constexprs = sig
    if not args and len(kwargs) == len(names) and all(k in names for k in kwargs):
        bound = kwargs  # the route's launches come bound by name, defaults applied
    else:
        kwargs = {k: v for k, v in kwargs.items() if k in names}
        bound = inspect.getcallargs(fn, *args, **kwargs)
    cvt = ip._implicit_cvt
    out = {}
    for name, arg in bound.items():
        if name in constexprs:
            out[name] = arg
            continue
        cls = arg.__class__
        if cls is int:
            known = _ARG_I32 if _ARG_I32 and -2**31 <= arg < 2**31 else None
        else:
            known = _TENSOR_ARGS.get((cls, arg.dtype)) if hasattr(arg, "data_ptr") else None
        if known is None:
            v = out[name] = _cvt(arg, cvt)
            ty = getattr(v, "type", None)
            if isinstance(ty, _tl().pointer_type) and hasattr(v, "handle"):
                size = max(1, ty.element_ty.primitive_bitwidth // 8)
                if int(v.handle.data[0]) % size == 0:
                    v.handle.attr[_ALIGNED] = True
                if cls is not int and hasattr(arg, "data_ptr") and v.handle.__class__ is ip.TensorHandle:
                    from triton.runtime.jit import mangle_type

                    _TENSOR_ARGS[(cls, arg.dtype)] = (ty, _PROTOS[mangle_type(arg)], size)
            elif cls is int and not _ARG_I32 and "i32" in _PROTOS:
                _ARG_I32[:] = [_ARG_TYPES["i32"], _PROTOS["i32"], 0]
            continue
        # a tensor of a class and dtype seen before (its pointer type, prototype and element size kept),
        # or an int32 scalar
        ty, proto, size = known
        handle = _new_handle()
        if size:
            address = arg.data_ptr()
            handle.data, handle.attr = np.array([address], dtype=np.uint64), {_ALIGNED: True} if address % size == 0 else {}
        else:
            handle.data, handle.attr = np.array([arg], dtype=np.int32), {}
        handle.dtype = ty
        v = out[name] = _new_tensor(proto.__class__)
        v.__dict__.update(proto.__dict__)
        v.handle = handle
    return out, constexprs


# (tensor class, dtype) -> (pointer type, prototype argument, element size): an argument's type follows
# from its class and dtype alone, as the interpreter's mangling of it does
_TENSOR_ARGS: dict[tuple[type, Any], tuple[Any, Any, int]] = {}
_ARG_I32: list[Any] = []  # [type, prototype, 0] of an int argument in int32's range


def _new_handle() -> Any:
    TensorHandle = _interp().TensorHandle
    return TensorHandle.__new__(TensorHandle)


def _new_tensor(cls: type) -> Any:
    return cls.__new__(cls)


_ARG_TYPES: dict[str, Any] = {}


def _cvt(arg: Any, implicit_cvt: Callable[[Any], Any]) -> Any:
    """The interpreter's conversion of an argument (`implicit_cvt`), with the language type of an integer
    or a tensor parsed once per type string rather than at every launch."""
    cls = arg.__class__
    if cls is not int and not hasattr(arg, "data_ptr"):
        return implicit_cvt(arg)  # floats (the route makes them fp32), bools, tuples, descriptors
    from triton.runtime.jit import mangle_type

    mangled = mangle_type(arg)
    ty = _ARG_TYPES.get(mangled)
    if ty is None:
        ty = _ARG_TYPES[mangled] = _tl().str_to_ty(mangled, None)
    ip = _interp()
    if cls is int:
        if -2**31 <= arg < 2**31:
            dtype: Any = np.int32
        elif 2**31 <= arg < 2**32:
            dtype = np.uint32
        elif -2**63 <= arg < 2**63:
            dtype = np.int64
        elif 2**63 <= arg < 2**64:
            dtype = np.uint64
        else:
            return implicit_cvt(arg)  # the interpreter's error
        return _arg_tensor(np.array([arg], dtype=dtype), ty, mangled)
    return _arg_tensor(np.array([arg.data_ptr()], dtype=np.uint64), ty, mangled)


_PROTOS: dict[str, Any] = {}


def _arg_tensor(data: np.ndarray, ty: Any, mangled: str) -> Any:
    """tl.tensor(TensorHandle(data, ty), ty), made as a copy of the first one of its type with the new
    handle: the constructors' checks and shape work are the same for every argument of one type."""
    proto = _PROTOS.get(mangled)
    ip = _interp()
    if proto is None:
        proto = _PROTOS[mangled] = _tl().tensor(ip.TensorHandle(data, ty), ty)
    handle = ip.TensorHandle.__new__(ip.TensorHandle)
    handle.data, handle.dtype, handle.attr = data, ty, {}
    out = proto.__class__.__new__(proto.__class__)
    out.__dict__.update(proto.__dict__)
    out.handle = handle
    return out


def _grid3(grid: Any, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(inspect.getcallargs(fn, *args, **{k: v for k, v in kwargs.items()
                                                      if k in inspect.getfullargspec(fn).args}))
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"grid {grid!r}: a launch grid has 1 to 3 dimensions; pass e.g. (n,) or (x, y)")
    return grid + (1,) * (3 - len(grid))  # type: ignore[return-value]


def _tensors(values: list[Any]) -> list[Any]:
    out = []
    for v in values:
        if isinstance(v, tuple):
            out += _tensors(list(v))
        elif hasattr(v, "base") and hasattr(v, "dtype") and hasattr(v.base, "untyped_storage"):
            out.append(v.base)  # triton's TensorWrapper (a reinterpreted dtype)
        elif hasattr(v, "untyped_storage"):
            out.append(v)
    return out


def _raw_fn(fn: Any) -> Callable[..., Any]:
    return getattr(fn, "fn", fn)


# -- running ----------------------------------------------------------------------------------------

_REASONS: dict[Any, str] = {}


def fallback_reason_cached(fn: Any) -> str | None:
    """The reason a kernel was last sent to the exact interpreter for good, if it was."""
    return _REASONS.get(_raw_fn(fn))


def _undo(log: list[Callable[[], None]], start: int = 0) -> None:
    while len(log) > start:
        log.pop()()


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
    src = getattr(fn, "src", None) or ""
    if total > 1 and "atomic_" in src:
        _REASONS[raw] = reason = "atomics across instances: exact interpreter"
        return reason
    with _LOCK:
        return _run_all(raw, (gx, gy, gz), total, args, kwargs)


class _Engine:
    """The builder and front end of batched runs (made once: the language objects keep no launch state)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.builder = BatchedBuilder(base)
        self.semantic = _semantic_class()(_RecordingBuilder(self.builder))


_ENGINE: list[_Engine] = []
_COORDS: dict[tuple[int, int, int], np.ndarray] = {}
# groups run through the language front end, and replayed from a tape (the tests read these)
STATS = {"traced_groups": 0, "replayed_groups": 0, "untaped": 0,
         # loads and stores served from a formula pointer, and comparisons that were constants
         "formula_loads": 0, "formula_stores": 0, "constant_compares": 0, "constant_selects": 0,
         # replays that took the values fixed by program ids, constants and scalars from an earlier one
         "reused_statics": 0,
         # of those, replays that also took the address arithmetic, the pointer arguments being the same
         "reused_addresses": 0,
         # masked loads and stores served as the unmasked box of lanes their mask keeps in every instance
         "boxed_masks": 0,
         # selects on a condition that differs between lanes, made from the operands' bits
         "branchless_selects": 0,
         # loads and stores through one view of instances on a grid of two axes
         "grid_accesses": 0,
         # loads and stores of scattered instances as whole rows of a 2-d view (cache slots)
         "row_accesses": 0}
_UNTAPED: dict[Any, str] = {}
# tapes by specialization: (function, argument kinds) -> one tape per path taken through the kernel
_TAPES: dict[tuple[Any, ...], list[_Tape]] = {}
_MAX_TAPES = 8


def _engine() -> _Engine:
    if not _ORIGINAL_SEMANTIC:
        _ORIGINAL_SEMANTIC.append(_interp().interpreter_semantic)
    base = _interp().interpreter_builder
    if not _ENGINE or _ENGINE[0].base is not base:
        _ENGINE[:] = [_Engine(base)]
    return _ENGINE[0]


def _arg_key(v: Any) -> Any:
    tl = _tl()
    if isinstance(v, tl.core.tensor):
        return ("t", str(v.type))
    if isinstance(v, tuple):
        return ("tuple",) + tuple(_arg_key(x) for x in v)
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return (type(v).__name__, v)


def _split(part: np.ndarray, d: _Diverged, groups: int, pending: list[np.ndarray]) -> int:
    """Split a group by the decision its instances disagreed on; the parts go first in `pending`."""
    keys = d.keys
    _, first = np.unique(keys, return_index=True)
    parts = [part[keys == keys[i]] for i in sorted(first)]
    groups += len(parts) - 1
    if groups >= _MAX_GROUPS:
        raise BatchedFallback(
            f"divergent control flow at {d.where} (instances take different branches or loop "
            f"trip counts: more than {_MAX_GROUPS} groups): exact interpreter")
    pending[:0] = parts
    return groups


def _first_group(total: int, bound: dict[str, Any], constexprs: set[str]) -> int:
    """Instances in a launch's first group, before its block sizes are measured: the largest integer
    constexpr stands for a block's size."""
    sizes = [v for k, v in bound.items() if k in constexprs and type(v) is int and v > 1]
    return max(1, min(total, _FIRST_GROUP_MAX, _GROUP_ELEMENTS // max(sizes, default=1)))


def _run_all(raw: Callable[..., Any], grid: tuple[int, int, int], total: int, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> str | None:
    engine = _engine()
    builder = engine.builder
    body = _rewritten(raw)
    scope = None
    log: list[Callable[[], None]] = []
    try:
        bound, constexprs = _bind(raw, args, kwargs)
        key = (raw,) + tuple((name, _arg_key(v)) for name, v in bound.items())
        memory = _Memory(_tensors(list(args) + list(kwargs.values())))
        coords = _COORDS.get(grid)
        if coords is None:
            if len(_COORDS) > 64:
                _COORDS.clear()
            coords = _COORDS[grid] = np.stack(np.unravel_index(np.arange(total), grid), axis=1).astype(np.int32)
        start, size = 0, _first_group(total, bound, constexprs)
        pointer_args: set[str] = set()
        opaque_args: set[str] = set()
        while start < total:
            groups = 0
            pending = [coords[start:start + size]]
            start += size
            per_instance = 1
            while pending:
                part = pending.pop(0)
                run = _Run(_Group(part, grid), total, log, memory, final=start >= total and not pending)
                mark = len(log)
                builder.run = run
                tapes = _TAPES.setdefault(key, [])
                outcome = None
                for tape in tapes:
                    try:
                        _replay(tape, bound, run)
                        outcome = "replayed"
                        break
                    except _GuardFailed:  # another path through the kernel: the next tape, or a trace
                        _undo(log, mark)
                        run.max_elements = 1
                    except _Diverged as d:
                        _undo(log, mark)
                        groups = _split(part, d, groups, pending)
                        outcome = "split"
                        break
                if outcome == "replayed":
                    STATS["replayed_groups"] += 1
                    per_instance = max(per_instance, run.max_elements)
                    continue
                if outcome == "split":
                    continue
                tape = _Tape() if len(tapes) < _MAX_TAPES else None
                if tape is not None:
                    for name, v in bound.items():
                        if hasattr(v, "handle"):
                            tape.args[name] = tape.add(v.handle)
                            ty = getattr(v, "dtype", None)
                            # a scalar's value, or a pointer's address, may key reused values; anything
                            # else (a descriptor...) is read anew
                            if v.handle.__class__ is not _interp().TensorHandle or ty is None:
                                opaque_args.add(name)
                            elif ty.is_ptr():
                                pointer_args.add(name)
                        elif isinstance(v, tuple):
                            tape.broken = f"argument {name} is a tuple"
                if scope is None:  # only a traced run executes the kernel's Python
                    for hook in _TRACE_HOOKS:
                        hook()
                    scope = _patch_language(raw, engine.semantic, batched=True)
                    _GLOBALS.enter(raw)
                _STATE.tape = tape
                try:
                    body(**bound)
                except _Diverged as d:
                    _undo(log, mark)
                    groups = _split(part, d, groups, pending)
                    continue
                finally:
                    _STATE.tape = None
                STATS["traced_groups"] += 1
                if tape is not None:
                    if tape.broken is None:
                        tape.keep = []
                        tape.last_check = max((i for i, op in enumerate(tape.ops) if op[0] != 0), default=-1)
                        _plan_statics(tape, pointer_args, opaque_args)
                        tapes.append(tape)
                    else:
                        STATS["untaped"] += 1
                        _UNTAPED[raw] = tape.broken
                per_instance = max(per_instance, run.max_elements)
            size = max(1, min(total, _GROUP_ELEMENTS // per_instance))
        return None
    except BatchedFallback as e:
        _undo(log)
        _REASONS[raw] = e.reason
        return e.reason
    except Exception as e:  # the exact interpreter runs it and reports the kernel's own error
        if any(run_ is not None and run_.irreversible for run_ in [builder.run]):
            raise  # an atomic of the one instance took effect: running it again would repeat it
        _undo(log)
        for k in [k for k in _TAPES if k[0] is raw]:
            del _TAPES[k]
        return f"batched run failed ({type(e).__name__}: {e}): exact interpreter"
    finally:
        builder.run = None
        if scope is not None:
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


_NP_DTYPES: dict[Any, Any] = {}


def _cached_np_dtype(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The interpreter's type -> numpy dtype table, looked up once per type (it is rebuilt per call)."""
    def lookup(tt: Any) -> Any:
        try:
            return _NP_DTYPES[tt]
        except KeyError:
            out = _NP_DTYPES[tt] = original(tt)
            return out
        except TypeError:
            return original(tt)

    lookup.__wrapped__ = original  # type: ignore[attr-defined]
    return lookup


def execute(kernel: Any, bound: dict[str, Any], grid: tuple[int, int, int]) -> str | None:
    """The Triton route's executor (launch.add_executor): a launch batched, with the route's
    interpreter fixes (float scalars, libdevice, bf16 in fp32 rounded to nearest even) in force, so
    that the result is the route's exact interpreter's. None when it ran; else why not."""
    from . import libdevice
    from .interpreter import _close_gaps, _kernel_name, _Scope

    ip = _interp()
    name = _kernel_name(kernel)
    raw = _raw_fn(kernel)
    reason = _REASONS.get(raw)
    if reason is not None:
        return reason
    engine = _engine()
    _rewritten(raw)
    scope = _Scope()
    try:
        _close_gaps(scope, name)
        libdevice.patch_builder(scope, lambda: name)
        # the names in the kernels' globals are read only by a traced run: patched when one starts
        _TRACE_HOOKS.append(lambda: libdevice.patch(scope, raw.__globals__, lambda: name))
        original = getattr(ip._get_np_dtype, "__wrapped__", ip._get_np_dtype)
        scope.set(ip, "_get_np_dtype", _cached_np_dtype(original))
        # libdevice calls reach the builder through the interpreter's module-level semantic
        scope.set(ip, "interpreter_semantic", engine.semantic)
        _NESTED_HOOKS.append(lambda fn: libdevice.patch(scope, fn.__globals__, lambda: name))
        return run_batched(kernel, grid, (), bound)
    finally:
        _NESTED_HOOKS.clear()
        _TRACE_HOOKS.clear()
        scope.restore()


_PURE_FUNCTIONS = frozenset([_check_overflow, _reduce_fast, _reduce_slice, _reduce_result, _cast_like, _scan_fast,
                             _scan_slice, _scan_stack, _swap_last, _range_value])
