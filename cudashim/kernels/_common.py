"""What every backend shares: static-argument validation, dtype names, UE8M0 arithmetic constants.

Static arguments (dims, dtypes, group size) are validated here once, so the three backends reject
the same inputs with the same messages; a kernel then only has to be right for valid inputs.
"""

from __future__ import annotations

import functools
from typing import Any

from ..errors import KernelArgumentError, KernelUnavailableError

__all__ = [
    "KernelArgumentError",
    "FP8_MAX",
    "AMAX_FLOOR",
    "MANT_1_75",
    "FLOAT_DTYPES",
    "SF_DTYPES",
    "check_positive",
    "check_dtype",
    "check_group",
    "sf_dtype_name",
    "sf_pack",
    "torch_dtype",
    "import_tilelang",
    "ue8m0_exponent",
    "ue8m0_inverse_scale",
    "ue8m0_byte",
    "e4m3",
]

#: largest finite float8_e4m3fn magnitude; scales map each group's amax onto it
FP8_MAX = 448.0
#: amax floor so an all-zero group still gets a finite scale (DeepGEMM uses the same 1e-4)
AMAX_FLOOR = 1e-4
#: float32 mantissa bits of 1.75 (448 = 1.75 * 2**8): amax's mantissa above it rounds the exponent up
MANT_1_75 = 0x600000


# The UE8M0 group cast, written once for both TileLang backends (T: tilelang.language or
# tilelang.ascend.language). Each returns a TIR expression; the kernels call them inside their
# prim_funcs. Integer ops on amax's bits, so every backend agrees bit for bit with torch/_ue8m0.py.
def ue8m0_exponent(T: Any, amax: Any) -> Any:
    """The unbiased power-of-two exponent e of a group whose abs-max is `amax`: 2**e * 448 >= amax."""
    bits = T.reinterpret(T.max(amax, AMAX_FLOOR), T.int32)
    return ((bits >> 23) & 0xFF) - 135 + T.if_then_else((bits & 0x7FFFFF) > MANT_1_75, 1, 0)


def ue8m0_inverse_scale(T: Any, e: Any) -> Any:
    """2**-e as float32 (built from its bits: exact)."""
    return T.reinterpret((127 - e) << 23, T.float32)


def ue8m0_byte(T: Any, e: Any) -> Any:
    """The UE8M0 scale byte of exponent e (biased by 127)."""
    return T.cast(e + 127, T.uint8)


def e4m3(T: Any, x: Any, inverse_scale: Any) -> Any:
    """x scaled by 2**-e, saturated to e4m3's range, cast to float8_e4m3fn."""
    return T.cast(T.clamp(x * inverse_scale, -FP8_MAX, FP8_MAX), T.float8_e4m3fn)


#: activation / cache dtypes the kernels take
FLOAT_DTYPES = ("bfloat16", "float16", "float32")
#: UE8M0 scale containers: bytes per container = scales per container
SF_DTYPES = {"int32": 4, "int16": 2, "uint8": 1}


def check_positive(kernel: str, **dims: int) -> None:
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise KernelArgumentError(f"{kernel}: {name}={value!r} must be a positive int")


def check_dtype(kernel: str, dtype: str) -> None:
    if dtype not in FLOAT_DTYPES:
        raise KernelArgumentError(f"{kernel}: dtype={dtype!r} is not one of {', '.join(FLOAT_DTYPES)}")


def check_group(kernel: str, elems: int, group_size: int, allowed: tuple[int, ...] = (32, 64, 128)) -> None:
    if group_size not in allowed:
        raise KernelArgumentError(
            f"{kernel}: group_size={group_size} is not one of {allowed}; use one of those group sizes"
        )
    if elems % group_size:
        raise KernelArgumentError(f"{kernel}: {elems} elements per row are not a multiple of group_size={group_size}")


def sf_dtype_name(sf_dtype: str | None) -> str:
    """The UE8M0 container dtype name: the argument, or the platform's `fp8_sf_type` when None."""
    if sf_dtype is None:
        sf_dtype = _platform_sf_dtype()
    if sf_dtype not in SF_DTYPES:
        raise KernelArgumentError(f"sf_dtype={sf_dtype!r} is not one of {', '.join(SF_DTYPES)}")
    return sf_dtype


def sf_pack(kernel: str, n_scales: int, sf_dtype: str) -> int:
    """Containers per row for n_scales UE8M0 bytes packed into sf_dtype (4 per int32, 2 per int16)."""
    pack = SF_DTYPES[sf_dtype]
    if n_scales % pack:
        raise KernelArgumentError(
            f"{kernel}: {n_scales} UE8M0 scales per row do not fill whole {sf_dtype} containers "
            f"({pack} per container); use a wider row or a smaller group_size, or sf_dtype='uint8'"
        )
    return n_scales // pack


def _platform_sf_dtype() -> str:
    # The platform states the container width (CUDA int32, Ascend int16); it may be a torch dtype
    # or a name depending on how it is spelled there, so normalise both.
    try:
        from ..platform.contract import get_platform

        value: Any = get_platform().fp8_sf_type
    except (ImportError, AttributeError):
        return "int32"
    return str(value).replace("torch.", "")


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


@functools.lru_cache(maxsize=None)
def import_tilelang(backend: str) -> Any:
    """tilelang, or KernelUnavailableError saying how to get it (the extra is optional)."""
    try:
        import tilelang
    except ImportError as exc:
        raise KernelUnavailableError(
            f"the {backend!r} kernel backend needs TileLang, which is not importable here ({exc}); "
            f"install it with: pip install 'cudashim[tilelang]' (tilelang==0.1.15), or use the torch backend"
        ) from exc
    return tilelang
