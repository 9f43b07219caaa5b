"""torch.compile's modes and templates on cuda tensors: compile_checks.py in one fresh interpreter, one test
per check (on an NVIDIA machine the same checks run on real CUDA, the oracle), the emulated device's one
backward through compiled flex_attention, a gpt-fast-style generation program
(examples/gpt_fast.py: reduce-overhead decode, dynamic-shape prefill) whose tokens equal its CPU run's, and
a compile on Inductor's compile threads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from emulated_run import REAL_CUDA, ROOT, check_file_tests, run_python

CHECK_NAMES = [
    "reduce_overhead_replays_with_new_inputs", "reduce_overhead_output_overwritten_by_a_later_run_raises",
    "reduce_overhead_output_kept_with_mark_step_and_clone", "reduce_overhead_training_step_equals_eager",
    "reduce_overhead_second_shape_records_a_second_graph", "max_autotune_matches_eager",
    "sdpa_compiled_with_dynamic_shapes", "sdpa_compiled_recompiles_dynamic_on_a_second_length",
    "flex_attention_compiled_for_inference", "fft_compiled_meets_its_meta_strides",
]

pytestmark = pytest.mark.slow


results, test_every_check_is_listed, test_check = check_file_tests("compile_checks", CHECK_NAMES)


_FLEX_BACKWARD = """
import torch
from torch.nn.attention.flex_attention import flex_attention
q, k, v = (torch.randn(1, 2, 128, 16, device="cuda", requires_grad=True) for _ in range(3))
try:
    torch.compile(flex_attention)(q, k, v).sum().backward()
    print("ran")
except Exception as e:
    print("ERR", type(e).__name__, str(e)[:2000])
"""


def test_compiled_flex_attention_backward_runs() -> None:
    """A backward through compiled flex_attention (CUDA's Triton template; on the device the eager operator's
    dense implementation, inlined by emulated/flex_decompose.py): no refusal, gradients on the device."""
    proc = run_python(["-c", _FLEX_BACKWARD])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split()[:1] == ["ran"], proc.stdout


_GPT_FAST = """
import sys
sys.path.insert(0, {examples!r})
import torch
import gpt_fast
from torch._inductor import cudagraph_trees
for tokens in gpt_fast.main("cuda"):
    print(" ".join(map(str, tokens)))
manager = cudagraph_trees.get_container(0).tree_manager
print("graphs", 0 if manager is None else len(list(manager.get_roots())),
      "skips", torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
"""


@pytest.mark.skipif(REAL_CUDA, reason="a GPU's float32 kernels round differently from the CPU's: its tokens may differ")
def test_gpt_fast_generation_tokens_equal_its_cpu_run() -> None:
    """examples/gpt_fast.py, unchanged, on the device (its decode replayed by CUDA graph trees) and on the CPU."""
    device = run_python(["-c", _GPT_FAST.format(examples=str(ROOT / "examples"))])
    assert device.returncode == 0, device.stderr[-4000:]
    lines = device.stdout.strip().splitlines()
    graphs = lines[-1].split()
    assert int(graphs[1]) >= 1 and graphs[3] == "0", lines[-1]  # the decode step's graph was recorded, none skipped
    env = dict(os.environ, CUDASHIM_DISABLE="1")  # the oracle: the same program on the CPU, plain torch
    cpu = subprocess.run([sys.executable, str(ROOT / "examples" / "gpt_fast.py"), "--device", "cpu"], env=env,
                         capture_output=True, text=True, timeout=900)
    assert cpu.returncode == 0, cpu.stderr[-4000:]
    got, want = " ".join(lines[:-1]).split(), cpu.stdout.split()
    assert len(want) == 5 + 6 + 8 + 6, cpu.stdout  # two prompts and six tokens each
    assert got == want, (device.stdout, cpu.stdout)


_COMPILE_THREADS = """
import torch
from torch._inductor.async_compile import AsyncCompile
x = torch.randn(4096, device="cuda")
got = torch.compile(lambda t: (t.sin() * 2 + 1).relu().sum(-1, keepdim=True) + t)(x)
want = (x.cpu().sin() * 2 + 1).relu().sum(-1, keepdim=True) + x.cpu()
print(got.device, torch.allclose(got.cpu(), want, rtol=1e-4, atol=1e-3),
      AsyncCompile.pool.cache_info().currsize, AsyncCompile.process_pool.cache_info().currsize)
"""


@pytest.mark.skipif(REAL_CUDA, reason="real CUDA compiles Triton kernels in the worker pool")
def test_compile_threads_compile_the_device_kernels(tmp_path) -> None:
    """With more than one compile thread, as on any host of more than one core (scripts/test gives its
    processes one), Inductor compiles the device's C++ kernels on its thread pool and starts its worker pool.
    A fresh Inductor cache: a kernel already compiled by an earlier run would be loaded, not compiled."""
    proc = run_python(["-c", _COMPILE_THREADS], {"TORCHINDUCTOR_COMPILE_THREADS": "2",
                                                  "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == ["cuda:0", "True", "1", "1"], proc.stdout
