"""Level L2 for CUDA: every cuda kernel generates sm_90 CUDA source without a GPU, and nvcc builds it.

The source checks name what makes the kernel right and fast: 16-byte vector copies for the cache
write, a block-wide reduction for the norm, the saturating e4m3 conversion, the skip of slot -1.
The nvcc builds use TileLang's own flags; running them is for the H200 (tests/gpu).
"""

from __future__ import annotations

import importlib
import re
import shutil

import pytest

pytest.importorskip("tilelang", reason="tilelang not installed: pip install 'cudashim[tilelang]' to run the L2 kernel tests")

from cudashim.kernels.cuda._jit import build_cubin, compile_program, lower_source  # noqa: E402

CASES = {
    "store_kv_cache_bf16": ("store_kv_cache", (1024, 16, "bfloat16", False, 32)),
    "store_kv_cache_fp8": ("store_kv_cache", (512, 16, "bfloat16", True, 64)),
    "rms_norm": ("norm", (4096, 1e-6, False, "bfloat16")),
    "rms_norm_residual": ("norm", (4096, 1e-6, True, "bfloat16")),
    "rope_neox": ("rope", (8, 2, 128, 128, True, "bfloat16")),
    "rope_interleaved_partial": ("rope", (8, 2, 128, 64, False, "bfloat16")),
    "per_token_cast_g128": ("quant", (7168, 128, "bfloat16")),
    "copy_block_tables": ("block_tables", (64, 2, -1)),
}
# one variant per family goes through nvcc: enough to prove the family builds, cheap enough for CI
NVCC = ["store_kv_cache_fp8", "rms_norm_residual", "rope_interleaved_partial", "per_token_cast_g128", "copy_block_tables"]


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    out = {}
    for case, (module, args) in CASES.items():
        mod = importlib.import_module(f"cudashim.kernels.cuda.{module}")
        out[case] = lower_source(mod._program(*args), arch="sm_90")
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_kernel_generates_sm90_source(sources, case):
    src = sources[case]
    assert re.search(r'extern "C" __global__ void __launch_bounds__\(\d+, 1\) \w+_kernel\(', src)
    if case == "store_kv_cache_bf16":
        assert "*(uint4*)(Cache" in src, "cache row not written with 16-byte vectors"
    if case.startswith("store_kv_cache"):
        assert re.search(r"0 <= (slot|Slot\[)", src), "slot -1 is not skipped"
    if case.startswith("rms_norm"):
        assert "tl::AllReduce<tl::SumOp" in src and "rsqrtf" in src
    if case in ("store_kv_cache_fp8", "per_token_cast_g128"):
        assert "__NV_E4M3" in src and "__NV_SATFINITE" in src
        assert "AllReduce<tl::MaxOp" in src  # the group abs-max spans threads
    if case == "copy_block_tables":
        assert "< n" in src and "-1" in src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH: CUDA source generated but not built")
@pytest.mark.parametrize("case", NVCC)
def test_cuda_kernel_builds_with_nvcc_for_sm90(sources, case):
    cubin = build_cubin(sources[case], arch="sm_90")
    assert cubin[:4] == b"\x7fELF"
    # the factories' own path: TileLang's JIT (device build + host glue), minus the launch
    module, args = CASES[case]
    program = importlib.import_module(f"cudashim.kernels.cuda.{module}")._program(*args)
    kernel = compile_program(program, target={"kind": "cuda", "arch": "sm_90"})
    assert [str(p.dtype) for p in kernel.params] == [str(b.dtype) for b in program.buffer_map.values()]
