"""Block pointers (`tl.make_block_ptr`, `tl.advance`, `tl.load`/`tl.store` with `boundary_check` and
`padding_option`) in the Triton route's interpreter, with Triton 3.2's semantics.

triton-ascend 3.2.0 speaks Triton 3.2's language, block pointers included, and Ascend kernels lean on them
(flash-linear-attention's Ascend branch builds every tile with `tl.make_block_ptr`). Newer Triton removed
them: its `tl.make_block_ptr` and `tl.advance` raise NotImplementedError and its `tl.load`/`tl.store` no
longer take `boundary_check`. On the simulated NPU the route presents them as part of triton-ascend's
language (ascend.py installs them only where the installed Triton lacks them).

The meaning, as Triton 3.2's front end gives it:
* `make_block_ptr(base, shape, strides, offsets, block_shape, order)`: a pointer to a `block_shape` tile of
  the `shape` tensor at `base` with `strides` (in elements), whose first element is at `offsets`. Every
  length must be the block's rank, `block_shape` constant integers, `order` a permutation of the dimensions
  (a layout hint: it changes no value). A `tl.int1` base is taken as `tl.int8`.
* `advance(ptr, offsets)`: the same block pointer moved by `offsets` (a new value; `ptr` is unchanged).
* `load(ptr, boundary_check=dims, padding_option=...)`: the tile; along each dimension in `boundary_check`
  an element outside `[0, shape)` is not read and takes the padding ("zero" or "nan"; "" leaves it
  undefined, zero here as in Triton's interpreter). Dimensions not checked are read unmasked. `mask` and
  `other` are refused, as "nan" is for integer element types.
* `store(ptr, value, boundary_check=dims)`: writes the tile, skipping elements outside the checked
  dimensions; the value (a scalar is broadcast) must have the block's shape and element type.
* `boundary_check`/`padding_option` given with an ordinary pointer are refused, as Triton 3.2 refuses them.

A block pointer is a `tl.tensor` of type `pointer_type(block_type(element, block_shape))` (Triton 3.2's
type, so `p.dtype.element_ty` and `p.type` answer as there) whose handle holds base, shape, strides and
offsets; loads and stores expand it to the tile's addresses and mask and go through the interpreter's own
masked load and store (bf16 and the route's other fixes apply unchanged).

The batched executor (batched.py) does not batch block pointers: a launch that makes one goes to the exact
interpreter, with that reason.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["BlockPointer", "is_block_pointer", "removed_in_installed_triton", "surface"]


@dataclass(frozen=True)
class BlockPointer:
    """The handle of a block pointer value: base address, and per dimension shape, stride, offset."""

    base: int
    element: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offsets: tuple[int, ...]
    block_shape: tuple[int, ...]
    order: tuple[int, ...]


def is_block_pointer(x: Any) -> bool:
    return isinstance(getattr(x, "handle", None), BlockPointer)


def removed_in_installed_triton() -> bool:
    """Whether the installed Triton's `tl.make_block_ptr` is the stub that raises (block pointers removed)."""
    import triton.language as tl

    if not hasattr(tl, "make_block_ptr"):
        return True
    import inspect

    try:
        src = inspect.getsource(tl.core.make_block_ptr)
    except (OSError, TypeError):
        return False
    return "NotImplementedError" in src


def _value(x: Any) -> Any:
    import triton.language as tl

    if isinstance(x, tl.constexpr):
        x = x.value
    return x


def _int(x: Any, what: str) -> int:
    """A scalar integer of the kernel: a Python int, a constexpr, or an interpreter scalar tensor."""
    x = _value(x)
    handle = getattr(x, "handle", None)
    if handle is not None and hasattr(handle, "data"):
        data = np.asarray(handle.data).reshape(-1)
        if data.size != 1 or not np.issubdtype(data.dtype, np.integer):
            raise ValueError(f"tl.make_block_ptr: each of `{what}` must be a scalar integer, got {x!r}")
        return int(data[0])
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"tl.make_block_ptr: each of `{what}` must be a scalar integer, got {x!r}")
    return int(x)


def _seq(x: Any) -> list[Any]:
    x = _value(x)
    return list(x) if hasattr(x, "__iter__") else [x]


def _refuse_batched(semantic: Any) -> None:
    """Block pointers inside a batched run: stop it, so the exact interpreter runs the launch."""
    from . import batched

    if isinstance(getattr(semantic, "builder", None), batched._RecordingBuilder):
        raise batched.BatchedFallback("unsupported op tl.make_block_ptr (block pointers): exact interpreter")


def _builtin(fn: Callable[..., Any]) -> Callable[..., Any]:
    from triton.language import core

    setattr(fn, core.TRITON_BUILTIN, True)
    return fn


def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any,
                   _semantic: Any = None) -> Any:
    import triton.language as tl

    _refuse_batched(_semantic)
    ty = getattr(base, "type", None)
    if ty is None or not ty.is_ptr() or ty.element_ty.is_block() or base.type.is_block():
        raise ValueError("tl.make_block_ptr: `base` must be a pointer to a tensor's first element (a pointer "
                         f"argument or pointer arithmetic on one), not a block of pointers or a block pointer: {base!r}")
    element = ty.element_ty
    if element == tl.int1:
        element = tl.int8  # Triton 3.2 takes a bool tensor's block through int8
    blocks = [_value(b) for b in _seq(block_shape)]
    if not all(isinstance(b, int) and not isinstance(b, bool) and 0 < b < 2 ** 31 for b in blocks):
        raise ValueError(f"tl.make_block_ptr: `block_shape` must be constant positive integers (constexpr), got "
                         f"{block_shape!r}")
    perm = [_value(o) for o in _seq(order)]
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"tl.make_block_ptr: `order` must be a permutation of 0..{len(perm) - 1}, got {order!r}")
    dims = [_seq(shape), _seq(strides), _seq(offsets), perm]
    if any(len(d) != len(blocks) for d in dims):
        raise ValueError("tl.make_block_ptr: `shape`, `strides`, `offsets`, `block_shape` and `order` must have "
                         f"one entry per dimension of the block ({len(blocks)}), got lengths "
                         f"{[len(d) for d in dims[:3]] + [len(blocks), len(perm)]}")
    address = int(np.asarray(base.handle.data).reshape(-1)[0])
    handle = BlockPointer(address, element, tuple(_int(s, "shape") for s in dims[0]),
                          tuple(_int(s, "strides") for s in dims[1]), tuple(_int(o, "offsets") for o in dims[2]),
                          tuple(blocks), tuple(perm))
    return tl.tensor(handle, tl.pointer_type(tl.block_type(element, list(blocks))))


def advance(base: Any, offsets: Any, _semantic: Any = None) -> Any:
    import triton.language as tl

    _refuse_batched(_semantic)
    if not is_block_pointer(base):
        raise ValueError(f"tl.advance: `base` must be a block pointer made by tl.make_block_ptr, got {base!r}")
    h: BlockPointer = base.handle
    delta = _seq(offsets)
    if len(delta) != len(h.block_shape):
        raise ValueError(f"tl.advance: `offsets` must have one entry per dimension of the block "
                         f"({len(h.block_shape)}), got {len(delta)}")
    # offsets are int32 in Triton 3.2's IR: an advance wraps as they do
    moved = tuple(int(np.int64(o + _int(d, "offsets")).astype(np.int32)) for o, d in zip(h.offsets, delta))
    return tl.tensor(BlockPointer(h.base, h.element, h.shape, h.strides, moved, h.block_shape, h.order), base.type)


def _boundary_dims(boundary_check: Any, rank: int) -> list[int]:
    boundary_check = _value(boundary_check)
    if boundary_check is None or (hasattr(boundary_check, "__len__") and len(boundary_check) == 0):
        return []
    dims = [_value(d) for d in _seq(boundary_check)]
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < rank:
            raise ValueError(f"`boundary_check` must name dimensions of the block (0..{rank - 1}), got "
                             f"{boundary_check!r}")
    if len(set(dims)) != len(dims):
        raise ValueError(f"Duplicate dimension in `boundary_check`: {boundary_check!r}")
    return sorted(dims)


def _expand(ptr: Any, boundary_check: Any, semantic: Any) -> tuple[Any, Any]:
    """The tile's addresses (a block of pointers) and, where dimensions are checked, its in-bounds mask."""
    import triton.language as tl
    from triton.runtime import interpreter

    h: BlockPointer = ptr.handle
    rank = len(h.block_shape)
    dims = _boundary_dims(boundary_check, rank)
    nbytes = h.element.primitive_bitwidth // 8
    byte_offset = np.zeros(h.block_shape, dtype=np.int64)
    inside = np.ones(h.block_shape, dtype=np.bool_)
    for d in range(rank):
        view = [1] * rank
        view[d] = h.block_shape[d]
        index = (h.offsets[d] + np.arange(h.block_shape[d], dtype=np.int64)).reshape(view)
        byte_offset = byte_offset + index * (h.strides[d] * nbytes)
        if d in dims:
            inside = inside & (index >= 0) & (index < h.shape[d])
    addresses = (np.uint64(h.base) + byte_offset.astype(np.uint64)).astype(np.uint64)
    scalar_ptr = tl.pointer_type(h.element)
    pointers = tl.tensor(interpreter.TensorHandle(addresses, scalar_ptr), tl.block_type(scalar_ptr, list(h.block_shape)))
    if not dims:
        return pointers, None
    mask = tl.tensor(interpreter.TensorHandle(inside, tl.int1), tl.block_type(tl.int1, list(h.block_shape)))
    return pointers, mask


def _wrap_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (), padding_option: Any = "",
             cache_modifier: Any = "", eviction_policy: Any = "", volatile: Any = False, _semantic: Any = None) -> Any:
        import triton.language as tl

        padding = _value(padding_option) or ""
        if padding not in ("", "zero", "nan"):
            raise ValueError(f"tl.load: `padding_option` must be one of '', 'zero', 'nan', got {padding!r}")
        if not is_block_pointer(pointer):
            if padding or _boundary_dims(boundary_check, 64):
                raise ValueError(
                    "tl.load: `padding_option` and `boundary_check` apply only to a block pointer (made by "
                    "tl.make_block_ptr), whose shape tells the bounds; with a tensor of pointers or a scalar "
                    "pointer, pass `mask` (and `other`) instead")
            return original(pointer, mask, other, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                            volatile=volatile, _semantic=_semantic)
        _refuse_batched(_semantic)
        if _value(mask) is not None or _value(other) is not None:
            raise ValueError("tl.load: `mask` and `other` cannot be given with a block pointer; use "
                             "`boundary_check` and `padding_option`")
        h: BlockPointer = pointer.handle
        if padding == "nan" and h.element.is_int():
            raise ValueError(f"tl.load: padding_option 'nan' is not supported for a block pointer to integers "
                             f"({h.element}); use 'zero'")
        pointers, inside = _expand(pointer, boundary_check, _semantic)
        fill = None
        if inside is not None and padding == "nan":
            fill = tl.tensor(_full(h, float("nan")), tl.block_type(h.element, list(h.block_shape)))
        return original(pointers, inside, fill, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                        volatile=volatile, _semantic=_semantic)

    return _builtin(load)


def _full(h: BlockPointer, value: float) -> Any:
    from triton.runtime import interpreter

    np_dtype = interpreter._get_np_dtype(h.element)
    return interpreter.TensorHandle(np.full(h.block_shape, value, dtype=np_dtype), h.element)


def _wrap_store(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: Any = "",
              eviction_policy: Any = "", _semantic: Any = None) -> Any:
        if not is_block_pointer(pointer):
            if _boundary_dims(boundary_check, 64):
                raise ValueError(
                    "tl.store: `boundary_check` applies only to a block pointer (made by tl.make_block_ptr), whose "
                    "shape tells the bounds; with a tensor of pointers or a scalar pointer, pass `mask` instead")
            return original(pointer, value, mask, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                            _semantic=_semantic)
        _refuse_batched(_semantic)
        if _value(mask) is not None:
            raise ValueError("tl.store: `mask` cannot be given with a block pointer; use `boundary_check`")
        h: BlockPointer = pointer.handle
        value = _semantic.to_tensor(_value(value))
        if value.type.is_block():
            if list(value.type.get_block_shapes()) != list(h.block_shape):
                raise ValueError(f"tl.store: the value's shape {list(value.type.get_block_shapes())} is not the "
                                 f"block pointer's block shape {list(h.block_shape)}")
        if value.dtype != h.element:
            raise ValueError(f"tl.store: the value's element type {value.dtype} is not the block pointer's "
                             f"{h.element}; convert it first (`.to(ptr.dtype.element_ty)`)")
        pointers, inside = _expand(pointer, boundary_check, _semantic)
        return original(pointers, value, inside, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                        _semantic=_semantic)

    return _builtin(store)


def surface() -> list[tuple[Any, str, Any]]:
    """(owner, name, value) that present block pointers in `triton.language`, for ascend.install; empty where
    the installed Triton still has them (its own then run)."""
    import triton.language as tl

    if not removed_in_installed_triton():
        return []
    make, adv = _builtin(make_block_ptr), _builtin(advance)
    load, store = _wrap_load(tl.core.load), _wrap_store(tl.core.store)
    member = _builtin(lambda self, offsets, _semantic=None: adv(self, offsets, _semantic=_semantic))
    out: list[tuple[Any, str, Any]] = []
    for owner in (tl, tl.core):
        out += [(owner, "make_block_ptr", make), (owner, "advance", adv), (owner, "load", load),
                (owner, "store", store)]
    out.append((tl.core.tensor, "advance", member))
    return out
