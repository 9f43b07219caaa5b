"""What `import torch_npu` does on the simulated NPU, as torch_npu does it (child processes, both modes):
the import leaves the device uninitialized (torch_npu defers its runtime to the first use of the device:
torch.npu._lazy_init, called by its C++ npu_lazy_init), and a program may import torch_npu before torch
(torch_npu's first line imports torch), through the shim as well as alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ._wheel import result

ROOT = Path(__file__).resolve().parents[2]

# torch_npu first, as a program may import it; then torch_npu.npu.is_initialized() after each step: the
# import, queries that need no device runtime, a call torch_npu queues until the runtime starts, the
# first tensor on the device
PROGRAM = r"""
import json
import torch_npu
import torch
steps = {"import": torch.npu.is_initialized()}
torch.npu.device_count(), torch.npu.is_available(), torch.npu.memory_allocated()
steps["queries"] = torch.npu.is_initialized()
torch.npu.manual_seed(5)
steps["queued seed"] = torch.npu.is_initialized()
x = torch.rand(3, device="npu")
steps["first tensor"] = torch.npu.is_initialized()
torch.npu.manual_seed(5)
steps["seed ran at init"] = torch.equal(x.cpu(), torch.rand(3, device="npu").cpu())
print("RESULT " + json.dumps({"steps": steps, "torch_npu": torch_npu.__file__, "device": str(x.device),
                              "cuda": torch.cuda.is_available(), "cuda_stream": "cuda_stream" in vars(torch.npu.Stream)}))
"""


def _alone(program: str) -> dict[str, Any]:
    from cudashim.emulated.npu.site import alone_env

    env = alone_env(ROOT)
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return result(subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True,
                                  timeout=300))


def _shim(program: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDASHIM_", "ASCEND_RT_", "CUDA_VISIBLE"))}
    for keep in ("CUDASHIM_BUILD_DIR", "CUDASHIM_WHEEL_CACHE"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return result(subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "ascend", "--simulate",
                                   "-c", program], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300))


@pytest.fixture(scope="module")
def answers() -> dict[str, dict[str, Any]]:
    """The program's answers in both modes: alone (the wheel's package over the simulated _C, no shim) and
    through the shim (`cudashim run --platform ascend --simulate`)."""
    from cudashim.emulated.npu.site import fetch_wheel

    wheel, why = fetch_wheel()
    if wheel is None:
        pytest.skip(f"the simulated NPU reads the torch-npu wheel: {why}")
    return {"alone": _alone(PROGRAM), "shim": _shim(PROGRAM)}


@pytest.mark.parametrize("mode", ["alone", "shim"])
def test_import_torch_npu_leaves_the_device_uninitialized_until_its_first_use(answers, mode):
    # was True from the import on: the simulated _C started the runtime when torch_npu was imported
    assert answers[mode]["steps"] == {"import": False, "queries": False, "queued seed": False, "first tensor": True,
                                      "seed ran at init": True}


def test_import_torch_npu_before_torch_through_the_shim(answers):
    got = answers["shim"]  # was: ModuleNotFoundError: No module named 'torch_npu'
    assert Path(got["torch_npu"]).parts[-2:] == ("torch_npu", "__init__.py") and got["device"] == "npu:0"
    assert got["cuda"] and got["cuda_stream"]  # the shim's installer ran, after torch_npu's own import
    assert answers["alone"]["device"] == "npu:0" and not answers["alone"]["cuda_stream"]  # alone: no installer
