"""The host side of every kernel, written once: static checks, and launchers for compiled programs.

Each family has a `check_<family>` run by all three backends' factories (so they reject the same
inputs with the same messages) and a `launch_<family>` shared by the two TileLang backends: given
the compiled program, it returns the kernel users call, which checks the dynamic tensors, views
them into the program's shapes (rows, int64 slots, uint8 scale bytes) and launches it. A backend
module therefore holds only what differs between targets: its TileLang program.

No helper here ends in `_tl`: `ops.backend_factories` picks up every public `*_tl` name that a
backend module binds, and these are imported into them.
"""

from __future__ import annotations

from typing import Any, Callable

from ._common import (
    KernelArgumentError,
    check_dtype,
    check_group,
    check_positive,
    sf_dtype_name,
    sf_pack,
    torch_dtype,
)

__all__ = [
    "check_store_kv_cache",
    "check_rms_norm",
    "check_rope",
    "check_per_token_cast",
    "check_copy_block_tables",
    "check_dtype_of",
    "check_residual",
    "check_cast_input",
    "check_store_inputs",
    "check_scale_cache",
    "launch_store_kv_cache",
    "launch_rms_norm",
    "launch_rope",
    "launch_per_token_cast",
    "launch_copy_block_tables",
]

_STORE = "store_kv_cache_tl"
_NORM = "rms_norm_tl"
_ROPE = "rope_tl"
_CAST = "per_token_cast_tl"
_TABLES = "copy_block_tables_tl"


# ---------------------------------------------------------------- static checks (all backends)


def check_store_kv_cache(row_elems: int, block_size: int, dtype: str, fp8: bool, group_size: int) -> None:
    check_positive(_STORE, row_elems=row_elems, block_size=block_size)
    check_dtype(_STORE, dtype)
    if fp8:
        check_group(_STORE, row_elems, group_size)


def check_rms_norm(hidden: int, dtype: str) -> None:
    check_positive(_NORM, hidden=hidden)
    check_dtype(_NORM, dtype)


def check_rope(num_q_heads: int, num_kv_heads: int, head_dim: int, rotary_dim: int | None, dtype: str) -> int:
    """The rotary dim in effect (head_dim when None), once the static arguments are valid."""
    rot = head_dim if rotary_dim is None else rotary_dim
    check_positive(_ROPE, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, rotary_dim=rot)
    check_dtype(_ROPE, dtype)
    if rot % 2 or rot > head_dim:
        raise KernelArgumentError(f"{_ROPE}: rotary_dim={rot} must be even and <= head_dim={head_dim}")
    return rot


def check_per_token_cast(hidden: int, group_size: int, dtype: str, sf_dtype: str | None) -> str:
    """The scale container's dtype name (the platform's when sf_dtype is None), once all is valid."""
    check_positive(_CAST, hidden=hidden)
    check_dtype(_CAST, dtype)
    check_group(_CAST, hidden, group_size)
    sf_name = sf_dtype_name(sf_dtype)
    sf_pack(_CAST, hidden // group_size, sf_name)
    return sf_name


def check_copy_block_tables(max_num_blocks: int, max_seqlen_q: int) -> None:
    check_positive(_TABLES, max_num_blocks=max_num_blocks, max_seqlen_q=max_seqlen_q)


# ---------------------------------------------------------------- dynamic checks (all backends)


def check_dtype_of(kernel: str, want: Any, **tensors: Any) -> None:
    """Every named tensor has the dtype the kernel was built for (one message names them all)."""
    for t in tensors.values():  # a plain loop: this runs on every launch of launch-bound kernels
        if t.dtype != want:
            break
    else:
        return
    names = "/".join(tensors)
    got = "/".join(str(t.dtype) for t in tensors.values())
    raise KernelArgumentError(f"{kernel}: {names} {'is' if len(tensors) == 1 else 'are'} {got}, the kernel was built for {want}")


def check_store_inputs(x: Any, cache: Any, want: Any, block_size: int) -> None:
    check_dtype_of(_STORE, want, x=x)
    if cache.shape[1] != block_size:
        raise KernelArgumentError(f"{_STORE}: cache block size is {cache.shape[1]}, the kernel was built for {block_size}")


def check_scale_cache(cache_sf: Any) -> None:
    if cache_sf is None:
        raise KernelArgumentError(f"{_STORE}: fp8=True needs cache_sf, the UE8M0 scale cache")


def check_residual(built_with: bool, res: Any) -> None:
    if built_with and res is None:
        raise KernelArgumentError(f"{_NORM}: built with residual=True, so call it with a residual")
    if not built_with and res is not None:
        raise KernelArgumentError(f"{_NORM}: built with residual=False, but a residual was passed")


def check_cast_input(x: Any, want: Any, hidden: int) -> None:
    if x.dtype != want or x.shape[-1] != hidden:
        raise KernelArgumentError(f"{_CAST}: x is {x.dtype} {tuple(x.shape)}, the kernel was built for {want} (M, {hidden})")


# ---------------------------------------------------------------- launchers (TileLang backends)


def launch_store_kv_cache(
    kernel: Any, row_elems: int, block_size: int, dtype: str, fp8: bool, group_size: int
) -> Callable[..., None]:
    import torch

    want = torch_dtype(dtype)
    n_sf = row_elems // group_size

    def store(x: Any, cache: Any, slot_mapping: Any, cache_sf: Any = None) -> None:
        check_store_inputs(x, cache, want, block_size)
        rows = x.reshape(-1, row_elems)
        pages = cache.view(cache.shape[0], block_size, row_elems)
        slots = slot_mapping if slot_mapping.dtype == torch.int64 else slot_mapping.to(torch.int64)
        if not fp8:
            kernel(rows, slots, pages)
            return
        check_scale_cache(cache_sf)
        # scale bytes go through a uint8 view: the container (int32 / int16) is only a host-side view
        sf = cache_sf.view(torch.uint8).view(cache_sf.shape[0], block_size, n_sf)
        kernel(rows, slots, pages, sf)

    return store


def launch_rms_norm(kernel: Any, hidden: int, residual: bool, dtype: str) -> Callable[..., object]:
    import torch

    want = torch_dtype(dtype)

    def norm(x: Any, weight: Any, res: Any = None):
        check_dtype_of(_NORM, want, x=x)
        check_residual(residual, res)
        rows = x.reshape(-1, hidden)
        y = torch.empty_like(rows)
        if not residual:
            kernel(rows, weight, y)
            return y.view_as(x)
        s = torch.empty_like(rows)
        kernel(rows, weight, res.reshape(-1, hidden), y, s)
        return y.view_as(x), s.view_as(x)

    return norm


def launch_rope(kernel: Any, dtype: str) -> Callable[..., tuple[Any, Any]]:
    import torch

    want = torch_dtype(dtype)

    def rope(positions: Any, q: Any, k: Any, cos_sin_cache: Any):
        check_dtype_of(_ROPE, want, q=q, k=k)
        pos = positions if positions.dtype == torch.int64 else positions.to(torch.int64)
        # q/k are often strided views of a fused qkv projection: rotate a packed copy, write it back
        qc = q if q.is_contiguous() else q.contiguous()
        kc = k if k.is_contiguous() else k.contiguous()
        kernel(pos, qc.view(qc.shape[0], -1), kc.view(kc.shape[0], -1), cos_sin_cache.float())
        if qc is not q:
            q.copy_(qc)
        if kc is not k:
            k.copy_(kc)
        return q, k

    return rope


def launch_per_token_cast(kernel: Any, hidden: int, group_size: int, dtype: str, sf_name: str) -> Callable[[Any], tuple[Any, Any]]:
    import torch

    want = torch_dtype(dtype)
    sf_t = torch_dtype(sf_name)

    def cast(x: Any) -> tuple[Any, Any]:
        check_cast_input(x, want, hidden)
        rows = x.reshape(-1, hidden)
        q = torch.empty(rows.shape, dtype=torch.float8_e4m3fn, device=x.device)
        sf = torch.empty(rows.shape[0], hidden // group_size, dtype=torch.uint8, device=x.device)
        kernel(rows, q, sf)
        return q.view(x.shape), sf.view(*x.shape[:-1], -1).view(sf_t)

    return cast


def launch_copy_block_tables(kernel: Any) -> Callable[..., Any]:
    def copy(src: Any, num_blocks: Any, out: Any) -> Any:
        kernel(src, num_blocks, out)
        return out

    return copy
