"""Drop-in replacements for CUDA-only APIs that engines import, with their exact signatures.

The built-in patch packs point at these paths (import them lazily; this package imports nothing heavy):

- `cudashim.replacements.flash_attn:{flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache}`
- `cudashim.replacements.flash_attn_cute:_flash_attn_fwd`
- `cudashim.replacements.deep_select:topk`

Each dispatches at call time: ascend -> torch_npu fused operators (L0: written against torch-npu
2.13.0's operator docs), CUDA tensors -> PyTorch's flash kernel on packed inputs, otherwise portable
torch (per-sequence SDPA / exact math).
"""

from __future__ import annotations

__all__: list[str] = []
