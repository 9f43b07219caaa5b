"""nano-vllm, unmodified, on a real NVIDIA GPU under `python -m cudashim run` (flash_attn not installed:
the shim's stand-in serves it), judged by examples/nano_vllm/compare.py — a float64 oracle of the same
weights, step by step, with a bf16 tolerance — and its flash_attn calls judged one by one.

Run on a GPU box (nano-vllm-fork installed; xxhash with it) from the repo root:
    python3 -m pytest -q -m gpu tests/gpu/test_nano_vllm_gpu.py -rs -s
NANO_VLLM_CHECKPOINT=DIR reuses (or builds once into) DIR instead of a fresh temporary checkpoint.

Token equality with transformers is not the bar on a GPU: transformers' own bf16 kernels there pick
other tokens than on the CPU where two logits are closer than bf16 rounding (see compare.py). So
transformers on the GPU and on the CPU must both pass the comparison first, then nano-vllm eager and
with CUDA graphs must pass it too.
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

pytestmark = [
    pytest.mark.gpu(torch=True),
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("nanovllm") is None,
                       reason="nano-vllm-fork is not installed (pip install --no-deps nano-vllm-fork xxhash)"),
]


def _run(args: list[str], env_extra: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env_extra or {})}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("nano_vllm_compare", EXAMPLE / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    given = os.environ.get("NANO_VLLM_CHECKPOINT")
    out = Path(given) if given else tmp_path_factory.mktemp("qwen3-tiny")
    if not (out / "config.json").is_file():
        _ok(_run([str(EXAMPLE / "build_checkpoint.py"), str(out)]))
    return out


@pytest.fixture(scope="module")
def oracle(compare, checkpoint):
    return compare.load_oracle(checkpoint)


def _judge(compare, oracle, name: str, path: Path) -> dict:
    res = compare.check_run(*oracle, json.loads(path.read_text()))
    print("\n" + compare.summary(name, res))
    return res


def test_transformers_on_the_gpu_and_on_the_cpu_pass_the_comparison(compare, oracle, checkpoint, tmp_path):
    """The comparison itself first: two correct bf16 engines, whatever tokens they pick, both pass, and
    the tolerance's premise holds on both: a bf16 logit is off by at most TOL_ULPS / 2 ulps."""
    runs = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / f"transformers-{device}.json"
        r = _run([str(EXAMPLE / "reference.py"), str(checkpoint), "--device", device, "--json", str(out),
                  "--logit-error"], {"CUDASHIM_DISABLE": "1"})
        _ok(r)
        print("\n" + r.stdout.strip())
        run = json.loads(out.read_text())
        runs[device] = run["token_ids"]
        assert _judge(compare, oracle, f"transformers on {device}", out)["ok"]
        assert max(run["logit_error_ulps"]) <= compare.TOL_ULPS / 2
    same = [a == b for a, b in zip(runs["cuda"], runs["cpu"])]
    print(f"transformers gpu vs cpu, same tokens per prompt: {same}")


@pytest.mark.parametrize("mode", ["eager", "graphs"])
def test_nano_vllm_under_the_shim_passes_the_comparison(compare, oracle, checkpoint, tmp_path, mode):
    out = tmp_path / f"nano-vllm-{mode}.json"
    r = _run(["-m", "cudashim", "run", "--platform", "nvidia", str(EXAMPLE / "run.py"), str(checkpoint),
              "--json", str(out), *(["--graphs"] if mode == "graphs" else [])])
    _ok(r)
    assert f"(tp=1, {mode})" in r.stdout
    assert _judge(compare, oracle, f"nano-vllm {mode}", out)["ok"]


def test_serve_example_under_the_shim():
    r = _run(["-m", "cudashim", "run", "--platform", "nvidia", str(ROOT / "examples" / "serve.py")])
    _ok(r)
    print(r.stdout.strip())
    assert "tokens/s" in r.stdout and "decode" in r.stdout


@pytest.fixture()
def nvidia_standin(monkeypatch):
    """This process calls the stand-in as the nvidia platform's shim would (CUDA tensors, fast paths)."""
    from cudashim import _state

    monkeypatch.setenv("CUDASHIM_PLATFORM", "nvidia")
    _state.reset()
    yield
    _state.reset()


def test_flash_attn_calls_as_nano_vllm_makes_them_match_float64(compare, oracle, checkpoint, tmp_path, nvidia_standin):
    """Every flash_attn call of an eager nano-vllm run (prefills, prefix-cached prefills, decodes
    with their block tables and cache_seqlens) — the output the engine got, and the same call replayed
    here through the stand-in on the GPU — against the float64 oracle."""
    import torch
    from nano_vllm_calls import TOL_ULPS, replay, worst_error

    calls_path, run_path = tmp_path / "calls.pt", tmp_path / "run.json"
    r = _run(["-m", "cudashim", "run", "--platform", "nvidia", "--config", str(EXAMPLE / "cudashim.toml"),
              str(ROOT / "tests" / "fixtures" / "nano_vllm_calls.py"), str(checkpoint), "--calls", str(calls_path),
              "--json", str(run_path)])
    _ok(r)
    print(r.stdout.strip().splitlines()[-1])
    calls = torch.load(calls_path, weights_only=False)
    kinds = {c["kind"] for c in calls}
    assert kinds == {"prefill", "prefix-cached prefill", "decode"}, kinds
    prefix = [c for c in calls if c["kind"] == "prefix-cached prefill"]
    # the batch beside its cached twin: one sequence reads a cached block (more keys than queries)
    assert any(((c["cu_k"].diff() - c["cu_q"].diff()) > 0).any() for c in prefix)
    assert max(len(c["cache_seqlens"]) for c in calls if c["kind"] == "decode") == 4
    worst_engine = max(worst_error(c) for c in calls)
    worst_replay = max(worst_error(c, replay(c, "cuda")) for c in calls)
    print(f"{len(calls)} calls; largest error against float64, in units of {TOL_ULPS} bf16 ulps of the largest "
          f"|value|: as the engine got it {worst_engine:.3f}, replayed {worst_replay:.3f}")
    run_ok = _judge(compare, oracle, "nano-vllm eager (recorded)", run_path)["ok"]  # judged before asserting
    assert worst_engine <= 1.0 and worst_replay <= 1.0
    assert run_ok
