"""torch_npu's NPU operators that cudashim calls on ascend, implemented on the CPU in plain torch.

These are the simulated NPU's operators (docs/design.md §1, "Simulated Ascend"): CPU implementations of each
operator's DOCUMENTED semantics (torch-npu 2.13.0's `_op_plugin_docs.py`, the same text on hiascend.com;
every convention is cited where it is implemented), never a claim about what an NPU computes. Arguments
the documentation forbids raise `NpuOperatorError`; documented features not simulated raise
`CapabilityError`; neither returns a silently wrong result.

Which operators: every `torch_npu.<op>` that `cudashim.replacements` calls on ascend — `_attn_ascend` calls
exactly these two (flash_attn, flash_attn_with_kvcache and flash-attn 4's `_flash_attn_fwd` route through
it); `deep_select.topk` and `_rotary` are plain torch on every platform, and the kernel library's ascend
backend (`kernels/ascend`) runs TileLang programs, not torch_npu operators. A simulated `torch_npu` module
takes its operators from OPERATORS.

Verification level: L0 for the operators themselves (written against the docs); tests check them against
naive float64 attention written from the same docs (tests/replacements/test_npu_operators_sim.py).
"""

from __future__ import annotations

from ._attn_rules import NpuOperatorError
from ._fused_infer import npu_fused_infer_attention_score
from ._fusion_attention import npu_fusion_attention

__all__ = ["OPERATORS", "NpuOperatorError", "npu_fusion_attention", "npu_fused_infer_attention_score"]

#: name on torch_npu -> CPU implementation
OPERATORS = {
    "npu_fusion_attention": npu_fusion_attention,
    "npu_fused_infer_attention_score": npu_fused_infer_attention_score,
}
