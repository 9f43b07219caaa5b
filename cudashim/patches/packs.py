"""Built-in patch packs, as data: CUDA-only symbols the shim knows how to replace.

A pack is switched off as a whole by naming it in `disable` (config) or CUDASHIM_DISABLE_PATCHES;
a single target by naming its "module:symbol".
On `nvidia` a built-in patch applies only where its target module is not installed (the real
kernel wins); on `cpu` and `ascend` it always applies.
"""

from __future__ import annotations

__all__ = ["PACKS", "PLATFORM_MODE", "ALWAYS", "ABSENT_ONLY", "pack_of"]

_FA = "cudashim.npu_ops.flash_attn"

PACKS: dict[str, dict[str, str]] = {
    "flash_attn": {
        "flash_attn:flash_attn_func": f"{_FA}:flash_attn_func",
        "flash_attn:flash_attn_varlen_func": f"{_FA}:flash_attn_varlen_func",
        "flash_attn:flash_attn_with_kvcache": f"{_FA}:flash_attn_with_kvcache",
        "flash_attn.flash_attn_interface:flash_attn_func": f"{_FA}:flash_attn_func",
        "flash_attn.flash_attn_interface:flash_attn_varlen_func": f"{_FA}:flash_attn_varlen_func",
        "flash_attn.flash_attn_interface:flash_attn_with_kvcache": f"{_FA}:flash_attn_with_kvcache",
    },
    "flash_attn_cute": {
        "flash_attn.cute.interface:_flash_attn_fwd": "cudashim.npu_ops.flash_attn_cute:_flash_attn_fwd",
    },
    "deep_select": {
        "deep_select.interface:topk": "cudashim.npu_ops.deep_select:topk",
    },
}

ALWAYS = "always"
ABSENT_ONLY = "absent-only"

# platform -> when a built-in patch applies
PLATFORM_MODE: dict[str, str] = {"ascend": ALWAYS, "cpu": ALWAYS, "nvidia": ABSENT_ONLY}


def pack_of(target: str) -> str | None:
    """The built-in pack holding `target`, or None."""
    for name, mapping in PACKS.items():
        if target in mapping:
            return name
    return None
