"""nano-vllm sizes its KV cache from torch.cuda.mem_get_info(): `min(free * 0.9, total * utilization -
allocated)`. The emulated device's free memory was the host's available memory, which does not count
device memory reserved but not yet written: an engine sized its cache past what the device would grant
and died with CUDA's out of memory. Here the program keeps device memory reserved and unwritten (a
private pool that holds a freed block, as the pools of CUDA graphs captured earlier hold theirs: in
memory_reserved(), not in memory_allocated()), another process holds 2 GiB of the host, and
nano-vllm runs unmodified with CUDA graphs and its default memory utilization."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from nano_vllm_e2e import EXAMPLE, MARKS, run

pytestmark = MARKS


PROGRAM = r"""
import runpy, sys, torch
GiB = 2**30
free, total = torch.cuda.mem_get_info()
# reserved, not written: with free taken as the host's available memory, the engine's cache sized
# from it does not fit beside this (held + 0.9 * free > total); counted, half a GiB is left for the cache
low, high = total - 0.9 * free + GiB // 4, free - GiB // 2
held = -(-int(low) // GiB) * GiB  # whole GiB: the device's size classes hold it exactly
if held > high:
    print(f"SKIP: {free / GiB:.2f} GiB free of {total / GiB:.2f}: too little to hold more than 0.9 * free "
          "and leave the engine half a GiB")
    raise SystemExit(0)
pool = torch.cuda.MemPool()
with torch.cuda.use_mem_pool(pool):
    buffer = torch.empty(held, dtype=torch.uint8, device="cuda")
del buffer  # the pool keeps its block: reserved, not allocated
assert torch.cuda.memory_reserved() >= held and torch.cuda.memory_allocated() < GiB
after, _ = torch.cuda.mem_get_info()
print(f"held {held / GiB:.2f} GiB of {total / GiB:.2f}; free {free / GiB:.2f} -> {after / GiB:.2f} GiB", flush=True)
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

HOLDER = "import sys; b = b'\\x01' * (2 * 2**30); print('holding', flush=True); sys.stdin.read()"


def test_cuda_graphs_at_default_utilization_beside_held_memory(checkpoint: Path, tmp_path: Path) -> None:
    program = tmp_path / "beside.py"
    program.write_text(PROGRAM)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"  # 2 GiB of the host, written
        r = run(["-m", "cudashim", "run", "--platform", "cpu", "--config", str(EXAMPLE / "cudashim.toml"), str(program),
                 str(EXAMPLE / "run.py"), str(checkpoint), "--graphs", "--gpu-memory-utilization", "0.9", "--num-prompts", "4", "--max-tokens", "8"])
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    print(r.stdout)
    if r.stdout.startswith("SKIP: "):
        pytest.skip(r.stdout.splitlines()[0])
    assert "tp=1, graphs)" in r.stdout, r.stdout
