"""nano-vllm (PyPI nano-vllm-fork, pinned in tests/requirements-subjects.txt), unmodified, on the simulated
Ascend NPU: `cudashim run --platform ascend --simulate`, the ascend code path end to end — the wheel's
transfer_to_npu, the ascend gap fillers and patch map, flash_attn → npu_fusion_attention /
npu_fused_infer_attention_score (the simulator's CPU implementations), HCCL over Gloo, npu:N tensors.
nano-vllm's @torch.compile functions (RMSNorm, rotary, sampler) compile to C++ kernels on npu tensors.
Judged as test_nano_vllm.py judges the cpu platform's runs (the float64 oracle, tests/e2e/conftest.py);
a file of its own so that the two run side by side under pytest-xdist.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from nano_vllm_e2e import EXAMPLE, MARKS, run

pytestmark = MARKS


_SIM_ENV: dict[str, str] = {}


def _sim_run(checkpoint: Path, out: Path, *extra: str, env_extra: dict[str, str] | None = None):
    from cudashim.emulated.npu.site import fetch_wheel

    wheel, why = fetch_wheel()
    if wheel is None:
        pytest.skip(f"the simulated NPU reads the torch-npu wheel: {why}")
    # two ranks on a loaded CI host take longer than one rank's limit
    return run(["-m", "cudashim", "run", "--platform", "ascend", "--simulate", str(EXAMPLE / "run.py"),
                str(checkpoint), "--json", str(out), *extra], {**_SIM_ENV, **(env_extra or {})}, timeout=1800)


@pytest.fixture(scope="module")
def sim_eager(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory):
    """sim_eager(tp): nano-vllm's eager run on the simulated NPU with tp ranks, (the process, its json file);
    run once per tp: the tp tests judge it, the NPU-graph tests compare their graph run's tokens to it."""
    runs: dict[int, tuple[subprocess.CompletedProcess, Path]] = {}

    def get(tp: int) -> tuple[subprocess.CompletedProcess, Path]:
        if tp not in runs:
            out = tmp_path_factory.mktemp("sim") / f"eager_tp{tp}.json"
            runs[tp] = (_sim_run(checkpoint, out, "--tp", str(tp)), out)
        return runs[tp]

    return get


def test_simulated_ascend_tp1_passes_the_float64_comparison(sim_eager, judge):
    r, out = sim_eager(1)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert "SIMULATED" in r.stderr.splitlines()[0]
    assert judge(out, "nano-vllm simulated ascend tp1")


@pytest.mark.parametrize("tp", [1, 2])
def test_simulated_ascend_npu_graphs_match_eager_and_pass_the_comparison(checkpoint, sim_eager, judge, tmp_path, tp):
    """enforce_eager=False on the simulated NPU: nano-vllm's torch.cuda.CUDAGraph / torch.cuda.graph calls
    reach torch_npu's own graphs.py through transfer_to_npu and capture NPU graphs (one per batch size),
    replayed at each decode step; the tokens are the eager run's and pass the float64 comparison. The
    decode's fused attention runs as one graph task reading the key lengths from the device
    (cudashim/replacements/_attn_ascend.py), as it must on an NPU.
    At tp=2 (ranks on npu:0 and npu:1, nano-vllm's NCCL calls on HCCL groups, Gloo underneath) this run
    is the tensor-parallel proof: its prefill runs eagerly, its decode steps replay NPU graphs holding
    the all-reduces, and the float64 comparison judges it; an eager tp=2 run would repeat that prefill
    and tp=1's eager decode."""
    out = tmp_path / "sim_graphs.json"
    r = _sim_run(checkpoint, out, "--tp", str(tp), "--graphs")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert f"tp={tp}, graphs)" in r.stdout
    if tp == 1:
        r, eager_out = sim_eager(1)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert json.loads(out.read_text())["token_ids"] == json.loads(eager_out.read_text())["token_ids"]
    assert judge(out, f"nano-vllm simulated ascend tp{tp} graphs")
