"""Compile a TileLang program for this backend, or lower it to source without a device (tests, L2)."""

from __future__ import annotations

from typing import Any

from .._common import import_tilelang

__all__ = ["compile_program", "lower_source", "build_cubin", "threads_for"]

_BACKEND = "cuda"


def _pass_configs(tilelang: Any) -> dict[Any, Any]:
    # Memory-bound row kernels with nothing to pipeline: warp specialisation would only add latency.
    # (They use no T.copy, so there is no TMA lowering to switch off.)
    return {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def compile_program(program: Any, target: Any = "cuda") -> Any:
    """The program JIT-compiled (nvcc + host glue) for `target`, by default the local GPU.

    Compiling needs no GPU when the target names its arch ({"kind": "cuda", "arch": "sm_90"});
    calling the result does.
    """
    tilelang = import_tilelang(_BACKEND)
    return tilelang.compile(program, target=target, out_idx=None, pass_configs=_pass_configs(tilelang))


def lower_source(program: Any, arch: str = "sm_90") -> str:
    """CUDA C++ source of the program for `arch`, generated without a GPU (level L2)."""
    tilelang = import_tilelang(_BACKEND)
    from tvm.target import Target

    target = Target({"kind": "cuda", "arch": arch})
    with tilelang.transform.PassContext(config=_pass_configs(tilelang)), target:
        artifact = tilelang.lower(program, target=target)
    return str(artifact.kernel_source)


def build_cubin(source: str, arch: str = "sm_90") -> bytes:
    """The source built by nvcc exactly as TileLang's JIT builds it (same flags, same headers)."""
    import_tilelang(_BACKEND)
    from tilelang.cuda.backend import tilelang_callback_cuda_compile
    from tvm.target import Target

    return bytes(tilelang_callback_cuda_compile(source, Target({"kind": "cuda", "arch": arch})))


def threads_for(elems: int, per_thread: int, lo: int = 32, hi: int = 256) -> int:
    """Threads for one row of `elems`: a power of two in [lo, hi] dividing elems, ~per_thread each.

    Powers of two because TileLang's block all-reduce needs them; dividing elems so every thread
    gets whole vectors (7168 = 2**10 * 7 takes 256 threads, not 448).
    """
    best = lo
    t = lo
    while t <= hi:
        if elems % t == 0 and elems // t >= min(per_thread, elems // lo):
            best = t
        t *= 2
    return best
