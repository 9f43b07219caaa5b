"""Compile a `tilelang.ascend` program (needs bisheng + an NPU), or lower it to AscendC source (CI, L2)."""

from __future__ import annotations

from typing import Any

from .._common import import_tilelang

__all__ = ["compile_program", "lower_source", "num_vector_cores", "DEFAULT_VECTOR_CORES"]

_BACKEND = "ascend"

#: Ascend 950's AI vector core count, used when no NPU can be asked (lowering in CI)
DEFAULT_VECTOR_CORES = 64


def num_vector_cores() -> int:
    """Vector cores of NPU 0 (T.Kernel's grid size); DEFAULT_VECTOR_CORES without a device."""
    try:
        from tilelang.carver.arch.driver.ascend_driver import get_num_vector_cores

        n = get_num_vector_cores()
    except Exception:  # no torch_npu / no device: lowering only
        return DEFAULT_VECTOR_CORES
    return int(n or DEFAULT_VECTOR_CORES)


def _pass_configs(tilelang: Any) -> dict[Any, Any]:
    # Row kernels index UB with data-dependent offsets; the race checker cannot see they are disjoint.
    return {tilelang.PassConfigKey.TL_DISABLE_DATA_RACE_CHECK: True}


def compile_program(program: Any) -> Any:
    """The program compiled for the local NPU (target "ascend"): a callable taking torch_npu tensors."""
    tilelang = import_tilelang(_BACKEND)
    import tilelang.ascend  # noqa: F401  (registers the target and its pipeline)

    return tilelang.compile(program, target="ascend", out_idx=None, pass_configs=_pass_configs(tilelang))


def lower_source(program: Any) -> str:
    """AscendC source of the program, lowered without bisheng or a device (level L2)."""
    tilelang = import_tilelang(_BACKEND)
    import tilelang.ascend  # noqa: F401
    from tvm.target import Target

    target = Target({"kind": "ascend"})
    with tilelang.transform.PassContext(config=_pass_configs(tilelang)), target:
        artifact = tilelang.lower(program, target=target)
    return str(artifact.kernel_source)
