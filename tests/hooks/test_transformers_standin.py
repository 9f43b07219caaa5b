"""A stood-in flash_attn must not break transformers' import-time and run-time probes.

What it reports, decided and tested here: transformers asks find_spec("flash_attn") (the stand-in
answers) and then importlib.metadata.version("flash_attn"); a stand-in has no distribution
metadata, so the probe says False and transformers keeps its own attention path (sdpa/eager)
rather than taking the flash_attention_2 path for a package that is not really there.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

import pytest

# find_spec, not an import: the tests run transformers in children; importing it here costs every
# xdist worker seconds at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed: run scripts/install")


def test_standin_flash_attn_keeps_transformers_working(shim: Callable[..., str]) -> None:
    out = shim("""
        patches.install(cfg(), "cpu")
        spec = importlib.util.find_spec("flash_attn")
        assert spec is not None and spec.origin == "cudashim stand-in"
        import transformers
        from transformers.utils import is_flash_attn_2_available, is_flash_attn_greater_or_equal
        assert is_flash_attn_2_available() is False
        assert is_flash_attn_greater_or_equal("2.1.0") is False
        import transformers.modeling_flash_attention_utils            # probes flash_attn at import
        import flash_attn
        from cudashim.patches import _standin
        assert _standin.is_standin(flash_attn)
        print("OK", transformers.__version__)
    """, timeout=300)
    assert "OK 4." in out
