"""nano-vllm (PyPI nano-vllm-fork, pinned in tests/requirements-subjects.txt), unmodified, under
`python -m cudashim run` on the cpu platform — the end-to-end proof that a CUDA-written engine
(NCCL, torch.cuda memory sizing, pinned buffers, flash_attn varlen + paged decode, a Triton KV-store
kernel, torch.compile) runs unchanged, driven only by the launcher and the patch map in
examples/nano_vllm/cudashim.toml.

The oracle is examples/nano_vllm/compare.py: transformers on the same weights in float64, fed each
run's own tokens, every step judged with a bf16 tolerance (token equality with transformers' bf16
`generate` is printed beside it, not asserted: it breaks wherever two logits are closer than bf16
rounding, which a correct engine on other kernels rounds the other way).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "nano_vllm"

# find_spec, not an import: nano-vllm cannot be imported without the shim (it needs flash_attn)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("nanovllm") is None,
                       reason="nano-vllm-fork is not installed: run scripts/install"),
]


def _run(args: list[str], env_extra: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env_extra or {})}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("qwen3-tiny")
    r = _run([str(EXAMPLE / "build_checkpoint.py"), str(out)])
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def reference(checkpoint, tmp_path_factory) -> dict:
    """transformers' bf16 greedy run on the CPU: {"prompts", "token_ids"}."""
    out = tmp_path_factory.mktemp("ref") / "ref.json"
    r = _run([str(EXAMPLE / "reference.py"), str(checkpoint), "--json", str(out)])
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("nano_vllm_compare", EXAMPLE / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def oracle(compare, checkpoint):
    return compare.load_oracle(checkpoint)


@pytest.fixture(scope="module")
def judge(compare, oracle, reference):
    """judge(path, name): whether every step of every prompt of the run written to path passes the
    float64 comparison (the run's common prefix with transformers' bf16 tokens is printed beside)."""

    def _judge(path: Path, name: str) -> bool:
        run = json.loads(path.read_text())
        res = compare.check_run(*oracle, run)
        print("\n" + compare.summary(name, res))
        for i, (g, ref) in enumerate(zip(run["token_ids"], reference["token_ids"])):
            _compare(g, ref, f"  {name} vs transformers' bf16 generate, prompt {i}")
        return res["ok"]

    return _judge


def _shim_run(checkpoint: Path, out: Path, *extra: str, env_extra: dict[str, str] | None = None):
    return _run(["-m", "cudashim", "run", "--platform", "cpu", str(EXAMPLE / "run.py"), str(checkpoint),
                 "--json", str(out), *extra], env_extra)


def _compare(engine: list[int], ref: list[int], which: str = "prompt 0") -> int:
    """Length of the common prefix; the drift after it is printed, not hidden."""
    n = next((i for i, (a, b) in enumerate(zip(engine, ref)) if a != b), min(len(engine), len(ref)))
    print(f"{which}: {n} equal tokens; engine then {engine[n:n + 8]} vs reference {ref[n:n + 8]}")
    return n


def test_tp1_eager_passes_the_float64_comparison(checkpoint, judge, tmp_path):
    out = tmp_path / "tp1.json"
    r = _shim_run(checkpoint, out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert "tokens/s" in r.stdout
    assert judge(out, "nano-vllm tp1 eager")


def test_flash_attn_calls_as_nano_vllm_makes_them_match_float64(checkpoint, judge, tmp_path):
    """Every flash_attn call of an eager run (prefills, a prefix-cached prefill, decodes), recorded as
    nano-vllm makes it (tests/fixtures/nano_vllm_calls.py): the output the engine got, and the call
    replayed here through the stand-in, against the float64 oracle. tests/device runs the same on a GPU."""
    import torch
    from nano_vllm_calls import TOL_ULPS, replay, worst_error

    calls_path, run_path = tmp_path / "calls.pt", tmp_path / "run.json"
    r = _run(["-m", "cudashim", "run", "--platform", "cpu", "--config", str(EXAMPLE / "cudashim.toml"),
              str(ROOT / "tests" / "fixtures" / "nano_vllm_calls.py"), str(checkpoint), "--calls", str(calls_path),
              "--json", str(run_path)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    calls = torch.load(calls_path, weights_only=False)
    assert {c["kind"] for c in calls} == {"prefill", "prefix-cached prefill", "decode"}
    prefix = [c for c in calls if c["kind"] == "prefix-cached prefill"]
    assert any(((c["cu_k"].diff() - c["cu_q"].diff()) > 0).any() for c in prefix)
    assert max(len(c["cache_seqlens"]) for c in calls if c["kind"] == "decode") == 4
    worst_engine = max(worst_error(c) for c in calls)
    worst_replay = max(worst_error(c, replay(c, "cpu")) for c in calls)
    print(f"{len(calls)} calls; largest error against float64 in units of {TOL_ULPS} bf16 ulps: "
          f"engine {worst_engine:.3f}, replayed {worst_replay:.3f}")
    assert worst_engine <= 1.0 and worst_replay <= 1.0
    assert judge(run_path, "nano-vllm eager (recorded)")


def test_the_comparison_rejects_a_token_the_model_did_not_choose(checkpoint, compare, oracle, reference):
    """The judge can fail: transformers' own run passes; the same run with one decided step's token
    swapped for the oracle's runner-up there fails, first at that step (the steps after it are judged
    in the swapped context, so they may fail too)."""
    res = compare.check_run(*oracle, reference)
    assert res["ok"]
    steps = res["prompts"][0]["detail"]
    t = max(range(len(steps)), key=lambda i: steps[i]["margin"] / steps[i]["tol"])  # the most clearly decided
    assert steps[t]["margin"] > steps[t]["tol"]
    logits = compare.oracle_logits(*oracle, reference["prompts"][0], reference["token_ids"][0])
    runner_up = int(logits[t].topk(2).indices[1])
    wrong = [list(ids) for ids in reference["token_ids"]]
    wrong[0][t] = runner_up
    bad = compare.check_run(*oracle, {"prompts": reference["prompts"], "token_ids": wrong})
    assert not bad["ok"]
    assert bad["prompts"][0]["failed_steps"][0] == t


def test_tp2_eager_passes_the_float64_comparison(checkpoint, judge, tmp_path):
    """Two processes (nano-vllm's own spawn + shared-memory RPC), NCCL → gloo under the shim."""
    out = tmp_path / "tp2.json"
    r = _shim_run(checkpoint, out, "--tp", "2", env_extra={"CUDASHIM_CPU_DEVICES": "2"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert judge(out, "nano-vllm tp2 eager")


@pytest.mark.parametrize("tp", [1, 2])
def test_cuda_graphs_on_the_emulated_device_match_eager_and_pass_the_comparison(checkpoint, judge, tmp_path, tp):
    """enforce_eager=False on the emulated device (issue 18): nano-vllm captures one graph per batch size
    at start-up and replays one per decode step; the tokens are the eager run's (the same CPU kernels)
    and pass the float64 comparison.
    nano-vllm's @torch.compile functions (RMSNorm, rotary, SiLU-and-mul, sampler) run compiled in
    both modes: their C++ kernels are captured and replayed with the rest of the step."""
    env = {"CUDASHIM_CPU_DEVICES": str(tp)}
    got = {}
    for mode in ("eager", "graphs"):
        out = tmp_path / f"{mode}.json"
        r = _shim_run(checkpoint, out, "--tp", str(tp), *(["--graphs"] if mode == "graphs" else []), env_extra=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert f"tp={tp}, {mode})" in r.stdout
        got[mode] = json.loads(out.read_text())["token_ids"]
    assert got["graphs"][0] == got["eager"][0]
    assert judge(out, f"nano-vllm tp{tp} graphs")


# ---- the same engine on the simulated Ascend NPU (issue 19) ------------------------------------------
# `cudashim run --platform ascend --simulate`: the ascend code path end to end — the wheel's
# transfer_to_npu, the ascend gap fillers and patch map, flash_attn → npu_fusion_attention /
# npu_fused_infer_attention_score (the simulator's CPU implementations), HCCL over Gloo, npu:N tensors.
# nano-vllm's @torch.compile functions (RMSNorm, rotary, sampler) compile to C++ kernels on npu tensors.
_SIM_ENV: dict[str, str] = {}


def _sim_run(checkpoint: Path, out: Path, *extra: str, env_extra: dict[str, str] | None = None, timeout: int = 900):
    from cudashim.emulated.npu.site import fetch_wheel

    wheel, why = fetch_wheel()
    if wheel is None:
        pytest.skip(f"the simulated NPU reads the torch-npu wheel: {why}")
    return _run(["-m", "cudashim", "run", "--platform", "ascend", "--simulate", str(EXAMPLE / "run.py"),
                 str(checkpoint), "--json", str(out), *extra], {**_SIM_ENV, **(env_extra or {})}, timeout=timeout)


def test_simulated_ascend_tp1_passes_the_float64_comparison(checkpoint, judge, tmp_path):
    out = tmp_path / "sim_tp1.json"
    r = _sim_run(checkpoint, out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert "SIMULATED" in r.stderr.splitlines()[0]
    assert judge(out, "nano-vllm simulated ascend tp1")


def test_simulated_ascend_tp2_passes_the_float64_comparison(checkpoint, judge, tmp_path):
    """Two ranks on npu:0 and npu:1, nano-vllm's NCCL calls on HCCL groups (Gloo underneath)."""
    out = tmp_path / "sim_tp2.json"
    r = _sim_run(checkpoint, out, "--tp", "2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert judge(out, "nano-vllm simulated ascend tp2")


@pytest.mark.parametrize("tp", [1, 2])
def test_simulated_ascend_npu_graphs_match_eager_and_pass_the_comparison(checkpoint, judge, tmp_path, tp):
    """enforce_eager=False on the simulated NPU: nano-vllm's torch.cuda.CUDAGraph / torch.cuda.graph calls
    reach torch_npu's own graphs.py through transfer_to_npu and capture NPU graphs (one per batch size),
    replayed at each decode step; the tokens are the eager run's and pass the float64 comparison. The
    decode's fused attention runs as one graph task reading the key lengths from the device
    (cudashim/replacements/_attn_ascend.py), as it must on an NPU."""
    got = {}
    for mode in ("eager", "graphs"):
        out = tmp_path / f"sim_{mode}.json"
        # two ranks on a loaded CI host: each run gets longer than the eager tests' limit
        r = _sim_run(checkpoint, out, "--tp", str(tp), *(["--graphs"] if mode == "graphs" else []), timeout=1800)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
        assert f"tp={tp}, {mode})" in r.stdout
        got[mode] = json.loads(out.read_text())["token_ids"]
    assert got["graphs"] == got["eager"]
    assert judge(out, f"nano-vllm simulated ascend tp{tp} graphs")
