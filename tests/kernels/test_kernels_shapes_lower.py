"""Both TileLang backends lower at the shapes real models use, not only the ones the L2 tests read.

Hidden sizes such as 7168 (2**10 * 7) or 896, head counts such as 14 q / 2 kv and partial rotary
dims are where thread layouts and UB plans break; one lowering each (no nvcc, no bisheng) finds it.
"""

from __future__ import annotations

import importlib

import pytest

pytest.importorskip("tilelang", reason="tilelang not installed: pip install 'cudashim[tilelang]' to run the L2 kernel tests")

# (family module, args without the asc core count), named after the model shape they stand for
SHAPES = [
    ("norm", (896, 1e-6, True, "bfloat16")),  # Qwen2.5-0.5B
    ("norm", (3584, 1e-6, False, "bfloat16")),  # Qwen2.5-7B
    ("norm", (5120, 1e-5, True, "bfloat16")),  # Qwen2.5-14B / Llama-2-13B
    ("norm", (7168, 1e-6, False, "bfloat16")),  # DeepSeek-V3
    ("rope", (14, 2, 64, 64, True, "bfloat16")),  # small GQA, 64-dim heads
    ("rope", (28, 4, 128, 128, False, "bfloat16")),  # Qwen2.5-7B heads, GPT-J layout
    ("rope", (32, 8, 128, 64, True, "bfloat16")),  # partial rotary (half the head)
    ("store_kv_cache", (576, 64, "bfloat16", False, 32)),  # MLA latent + rope (512 + 64)
    ("store_kv_cache", (256, 16, "float16", True, 32)),  # 2 kv heads x 128, fp8
    ("quant", (896, 32, "bfloat16")),
    ("block_tables", (7, 3, 0)),
]


@pytest.mark.parametrize("backend", ["cuda", "ascend"])
@pytest.mark.parametrize("module,args", SHAPES, ids=[f"{m}{a[:3]}" for m, a in SHAPES])
def test_kernel_lowers_at_model_shapes(backend, module, args):
    jit = importlib.import_module(f"cudashim.kernels.{backend}._jit")
    mod = importlib.import_module(f"cudashim.kernels.{backend}.{module}")
    program = mod._program(*args, jit.DEFAULT_VECTOR_CORES) if backend == "ascend" else mod._program(*args)
    src = jit.lower_source(program)
    assert "_kernel(" in src
