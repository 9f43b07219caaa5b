"""Level L2 for Ascend: every ascend kernel lowers to AscendC source (tilelang.ascend, no bisheng, no NPU).

The assertions read the produced source for what the kernel is supposed to be: a vector-core
entry point, DMA between GM and UB in both directions, the SIMT region where there is arithmetic,
the saturating e4m3 conversion for FP8. What only hardware can show is in cudashim/kernels/README.md.
"""

from __future__ import annotations

import importlib
import re

import pytest

pytest.importorskip("tilelang", reason="tilelang not installed: pip install 'cudashim[tilelang]' to run the L2 kernel tests")

from cudashim.kernels.ascend._jit import DEFAULT_VECTOR_CORES, lower_source  # noqa: E402

C = DEFAULT_VECTOR_CORES
CASES = {
    "store_kv_cache_bf16": ("store_kv_cache", (1024, 16, "bfloat16", False, 32, C)),
    "store_kv_cache_fp8": ("store_kv_cache", (512, 16, "bfloat16", True, 32, C)),
    "rms_norm": ("norm", (2048, 1e-6, False, "bfloat16", C)),
    "rms_norm_residual": ("norm", (2048, 1e-6, True, "bfloat16", C)),
    "rope_neox": ("rope", (8, 2, 128, 128, True, "bfloat16", C)),
    "rope_interleaved_partial": ("rope", (8, 2, 128, 64, False, "bfloat16", C)),
    "per_token_cast_g32": ("quant", (2048, 32, "bfloat16", C)),
    "copy_block_tables": ("block_tables", (64, 2, -1, C)),
}
SIMT = {"store_kv_cache_fp8", "rms_norm", "rms_norm_residual", "rope_neox", "rope_interleaved_partial",
        "per_token_cast_g32", "copy_block_tables"}
FP8 = {"store_kv_cache_fp8", "per_token_cast_g32"}


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    out = {}
    for case, (module, args) in CASES.items():
        mod = importlib.import_module(f"cudashim.kernels.ascend.{module}")
        out[case] = lower_source(mod._program(*args))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_asc_kernel_lowers_to_a_vector_core_entry_with_ub_dma_both_ways(sources, case):
    src = sources[case]
    assert re.search(r'extern "C" __global__ __vector__ void \w+_kernel\(', src), "no AIV kernel entry"
    assert "asc_copy_gm2ub" in src and "asc_copy_ub2gm" in src, "no GM<->UB DMA"
    # the persistent core loop: each core steps over the rows by the core count
    assert "block_idx" in src
    # T.Pipelined(num_stages=2): UB buffers and sync events alternate by iteration parity, so the
    # next row's GM->UB DMA overlaps this row's compute and UB->GM DMA
    assert re.search(r"\w+ & 1\)", src), "the row loop is not double-buffered"
    if case in SIMT:
        assert "__simt_vf__" in src and "asc_vf_call<" in src, "arithmetic outside a SIMT vector function"
    else:
        assert "asc_vf_call<" not in src  # the bf16 cache write is DMA only
    if case in FP8:
        assert "__ASC_E4M3" in src and "__ASC_SATFINITE" in src, "fp8 not converted with saturation"
        assert "8388607" in src and "6291456" in src  # the UE8M0 exponent from amax's mantissa bits
    if case.startswith("rms_norm"):
        assert "rsqrt" in src and "AllReduce<tl::SumOp" in src
    if case.startswith("store_kv_cache"):
        assert re.search(r"0 <= slot", src), "slot -1 is not skipped"
