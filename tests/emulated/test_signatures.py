"""Every public callable of torch.cuda (and of torch.cuda.memory, .random, .graphs, .streams) takes
under the emulated device the parameters plain PyTorch gives it: names, kinds and defaults, read by
inspect in a process without the shim (the oracle) and in one with it. Programs call them by
keyword (`torch.cuda.stream(stream=s)`, `memory_stats(device=d)`), so a renamed parameter is a
TypeError in someone's training script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from emulated_run import HERE, REAL_CUDA, ROOT

pytestmark = pytest.mark.skipif(REAL_CUDA, reason="compares the emulated device with plain torch; on CUDA both are torch's")


def _signatures(shim: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    script = str(HERE / "_signatures.py")
    if shim:
        env.pop("CUDASHIM_DISABLE", None)
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", script]
    else:
        env["CUDASHIM_DISABLE"] = "1"
        cmd = [sys.executable, script]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_torch_cuda_signatures_are_torchs() -> None:
    plain, shimmed = _signatures(shim=False), _signatures(shim=True)
    assert sorted(shimmed) == sorted(plain), "the shim adds or removes public names"
    # where plain torch's callable has no readable signature (the legacy tensor types of a CPU
    # build), there is nothing to compare
    wrong = {name: {"torch": plain[name], "shim": shimmed[name]}
             for name in plain if plain[name] is not None and shimmed[name] != plain[name]}
    assert not wrong, json.dumps(wrong, indent=1)


def test_keyword_calls() -> None:
    code = """
import torch
s = torch.cuda.Stream()
with torch.cuda.stream(stream=s):
    assert torch.cuda.current_stream() == s
e = torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False, external=False)
assert isinstance(e, torch.cuda.Event)
assert torch.cuda.memory_allocated(device=0) >= 0 and torch.cuda.get_device_name(device=0)
assert torch.cuda.can_device_access_peer(device=0, peer_device=0)
assert torch.cuda.memory_snapshot(mempool_id=None, include_traces=False) is not None
assert torch.cuda.graphs.is_current_stream_capturing() is False
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("CUDASHIM_DISABLE", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "-c", code], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-4000:]
