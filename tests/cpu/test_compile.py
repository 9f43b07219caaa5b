"""torch.compile on the cpu platform's emulated device: CUDA-written functions compiled with fullgraph=True
(any graph break raises) and error_on_recompile=True, each equal to its CPU-written twin; nano-vllm's
compile pattern (set_default_device, then @torch.compile on .to(dtype)) compiles one frame with no
warning; one real Inductor compile generates C++. One fresh interpreter runs it all under
`cudashim run --platform cpu` (the shim's import hook and device must not leak here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# idioms.py / compile_cases.py sit beside this file: pytest's rootdir-less import puts this folder on sys.path
from compile_cases import CASES  # noqa: E402

CONTEXTS = ("plain", "set_default_device")


@pytest.fixture(scope="module")
def run() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDASHIM_CPU_DEVICES="2")
    env.pop("CUDASHIM_DISABLE", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", str(HERE / "_compile_runner.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_shim_was_on_and_plain_torch_compiles_after(run: dict) -> None:
    assert run["shim_was_on"]
    assert run["warm"] == "", run["warm"]
    assert run["plain_after_uninstall"] == "", run["plain_after_uninstall"]


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_fullgraph_equals_cpu_twin(run: dict, context: str, name: str) -> None:
    result = run["cases"][f"{context}|{name}"]
    assert result["ok"], result["detail"]


def test_nano_vllm_pattern_compiles_once_without_warnings(run: dict) -> None:
    r = run["nano_vllm"]
    assert r["ok"], r.get("detail")
    assert r["frames"] == 1, "a graph break: more than one frame compiled"
    assert not [w for w in r["warnings"] if "does not know how to trace" in w or "recompile" in w], r["warnings"]
    assert r["dtype"] == "torch.bfloat16"


def test_inductor_generates_cpu_code(run: dict) -> None:
    r = run["inductor"]
    assert r["ok"], r.get("detail")
    assert r["detail"] == "", r["detail"]
    assert r["cpp"] and not r["triton"], "Inductor must generate C++ for the host-memory device, never Triton"


def test_inductor_code_for_cuda_is_the_cpus(run: dict) -> None:
    r = run["wrapper"]
    assert r["ok"], r.get("detail")
    assert r["kernels"] >= 1
    assert r["same_kernels"], "torch.cat compiled for cuda differs from the CPU's kernel (the GPU's pointwise cat)"
    assert r["empty_strided_calls"] == 0, "the generated wrapper allocates its buffers through torch.empty_strided"


_ROTARY_KERNELS = r"""
import re, sys
import torch
from torch._inductor.utils import run_and_get_code
sys.path.insert(0, {here!r})
from _compile_runner import _rotary
kernels = {{}}
for dev in {devices!r}:
    torch._dynamo.reset()
    args = tuple(t.to(dev) for t in (torch.randn(8, 2, 64).bfloat16(), torch.randn(8, 1, 32), torch.randn(8, 1, 32)))
    _, code = run_and_get_code(torch.compile(_rotary, fullgraph=True), *args)
    kernels[dev] = re.findall(r'extern "C".*?\}}\s*\'\'\'', "\n".join(code), re.S)
print(len(kernels["cuda"]), kernels.get("cpu", kernels["cuda"]) == kernels["cuda"])
"""


def test_code_cached_under_another_thread_count_is_not_loaded(tmp_path: Path) -> None:
    """Inductor's C++ kernels specialize on the thread count; its cache keys on it for CPU graphs only.
    A cuda graph compiled with two threads, then with one, against one cache: the second compile is
    the one-thread CPU kernel, not the cached two-thread code (the first process only fills the cache)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    env.pop("CUDASHIM_DISABLE", None)
    for threads, devices in (("2", ("cuda",)), ("1", ("cpu", "cuda"))):
        code = _ROTARY_KERNELS.format(here=str(HERE), devices=devices)
        proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "-c", code], cwd=ROOT,
                              env=dict(env, OMP_NUM_THREADS=threads), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        n, same = proc.stdout.split()[-2:]
        assert int(n) >= 1 and same == "True", (threads, proc.stdout[-2000:])
