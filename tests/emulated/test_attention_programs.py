"""Attention in whole programs (attention_program_checks.py) in one fresh interpreter, one test per check:
on the emulated device, and with no shim on an NVIDIA machine, where CUDA itself is the oracle."""

from __future__ import annotations

import pytest

from emulated_run import run_checks

CHECK_NAMES = [
    "cudagraphs_replay_reads_the_kv_cache_written_between_calls", "cudagraphs_replay_reads_the_kv_cache_dynamic",
    "graph_replay_of_flash_attention_reads_updated_inputs", "compiled_sdpa_with_mask_trains_float32",
    "compiled_sdpa_with_mask_trains_bfloat16", "compiled_sdpa_with_mask_trains_dynamic",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results() -> dict:
    return run_checks("attention_program_checks")


def test_every_check_is_listed(results: dict) -> None:
    assert sorted(results) == sorted(CHECK_NAMES)


@pytest.mark.parametrize("name", CHECK_NAMES)
def test_check(results: dict, name: str) -> None:
    assert results[name]["ok"], results[name]["detail"]
