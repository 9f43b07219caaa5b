"""nano-vllm under a device profile: it sizes its KV cache from the profiled GPU's memory (far more
than this host has, reserved on demand and mostly never touched), runs, and the preflight names the
peak and the KV cache's allocation in the example's own code."""

from __future__ import annotations

import re
from pathlib import Path

from nano_vllm_e2e import EXAMPLE, MARKS, run

pytestmark = MARKS


def test_kv_cache_sized_from_the_profile(checkpoint: Path) -> None:
    r = run(["-m", "cudashim", "run", "--platform", "cpu", "--profile", "h100-80gb", str(EXAMPLE / "run.py"),
             str(checkpoint), "--gpu-memory-utilization", "0.9", "--max-tokens", "8"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "nano-vllm: 4 prompts, 32 tokens" in r.stdout, r.stdout
    pre = [ln for ln in r.stderr.splitlines() if ln.startswith("cudashim preflight (h100-80gb, cuda:0, 79.11 GiB)")]
    assert len(pre) == 1, r.stderr[-3000:]
    # 0.9 of the profile's 79.11 GiB, less the weights: the KV cache, allocated by nano-vllm for LLM(...)
    largest = re.search(r"largest allocation ([\d.]+) GiB at (\S+):\d+ \(main\)", pre[0])
    assert largest and 60 < float(largest.group(1)) < 71.2 and largest.group(2) == str(EXAMPLE / "run.py"), pre
    peak = re.search(r"peak allocated ([\d.]+) GiB at (\S+):\d+", pre[0])
    assert peak and float(peak.group(1)) >= float(largest.group(1)), pre
    assert "torchinductor_" not in pre[0] and pre[0].endswith("; fits"), pre
