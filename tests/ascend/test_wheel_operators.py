"""torch_npu's own operators (the wheel's npu_native_functions_by_codegen.yaml) on the simulated NPU, as
the wheel's Python reaches them: each registered where torch_npu's codegen registers it, so that a call
gets the simulator's kernel or torch_npu's refusal for what needs CANN, never the dispatcher's
"no kernel" error. One child process runs the simulated torch_npu alone (no global state here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudashim.emulated.npu.site import alone_env, fetch_wheel

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = r"""
import json, torch, torch_npu
out = {}
try:
    # no tensor argument: the dispatcher finds no device key, the listing names CompositeExplicitAutograd
    torch_npu.npu_dropout_gen_mask([128], 0.5, dtype=torch.float16, device="npu")
    out["gen_mask"] = "computed"
except Exception as e:
    out["gen_mask"] = f"{type(e).__name__}: {e}"
ptr = torch_npu.npu.caching_allocator_alloc(1 << 20)
before = torch_npu.npu.memory_allocated()
torch_npu.npu.caching_allocator_delete(ptr)
out["raw_alloc"] = [ptr != 0, before - torch_npu.npu.memory_allocated()]
from torch_npu.utils.flops_count import _FlopsCounter
counter = _FlopsCounter()
counter.start()
torch.ones(4, 4, device="npu") @ torch.ones(4, 4, device="npu")
out["flops"] = counter.get_flops()
import os
# the wheel's C++ headers, which torch_npu's tests and cpp extensions read beside the package
out["headers"] = os.path.isfile(os.path.join(os.path.dirname(torch_npu.__file__), "include", "torch_npu", "csrc",
                                             "libs", "init_npu.h"))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def answers() -> dict:
    if fetch_wheel()[0] is None:
        pytest.skip("the simulated torch_npu is assembled from the torch-npu wheel")
    r = subprocess.run([sys.executable, "-c", PROGRAM], env=alone_env(ROOT), capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_an_operator_without_a_tensor_argument_reaches_its_kernel_or_torch_npus_refusal(answers):
    got = answers["gen_mask"]
    assert "no fallback function is registered" not in got, got
    assert got == "computed" or ("CannRequired" in got and "ERR00007" in got), got


def test_caching_allocator_alloc_gives_a_block_of_the_current_device_that_delete_returns(answers):
    assert answers["raw_alloc"] == [True, 1 << 20]


def test_the_flop_counter_reads_torch_npus_counts_by_their_binding_names(answers):
    # the simulator's kernels are the CPU's: nothing is counted, but the wheel's reader works
    assert answers["flops"] == [0, 0]


def test_the_wheels_cpp_headers_are_installed_beside_the_package_as_the_wheel_installs_them(answers):
    assert answers["headers"] is True
