"""Attention in whole programs (attention_program_checks.py) in one fresh interpreter, one test per check:
on the emulated device, and with no shim on an NVIDIA machine, where CUDA itself is the oracle."""

from __future__ import annotations

import pytest

from emulated_run import HERE, run_checks, run_python

CHECK_NAMES = [
    "cudagraphs_replay_reads_the_kv_cache_written_between_calls", "cudagraphs_replay_reads_the_kv_cache_dynamic",
    "graph_replay_of_flash_attention_reads_updated_inputs", "compiled_sdpa_with_mask_trains_float32",
    "compiled_sdpa_with_mask_trains_bfloat16", "compiled_sdpa_with_mask_trains_dynamic",
    "compiled_flex_attention_trains_like_causal_sdpa", "compiled_flex_attention_trains_like_causal_sdpa_dynamic",
    "compiled_flex_attention_returns_its_log_sum_exp", "varlen_attn_attends_within_each_sequence",
    "flash_attention_forward_outputs_as_cuda_returns_them",
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


def _train(attention: str) -> list[float]:
    import ast

    proc = run_python(["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                       str(HERE / "_flex_train_worker.py"), attention], timeout=900)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("rank 0 ok losses ")]
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-4000:]
    return ast.literal_eval(line[0].split(" ok losses ", 1)[1])


def test_fsdp2_training_step_with_compiled_flex_attention() -> None:
    """A pre-training framework's step, unmodified CUDA code: FSDP2 on a one-device mesh, meta-device init,
    compiled flex_attention with a causal block mask, AdamW, six steps. Its losses are those of the same
    program with causal SDPA (the oracle; float32, within 1e-4), and they go down."""
    flex, sdpa = _train("flex"), _train("sdpa")
    assert len(flex) == 6 and flex[-1] < flex[0], flex
    assert all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(flex, sdpa)), (flex, sdpa)
