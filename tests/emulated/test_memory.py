"""Device memory as CUDA reports it: out of memory, the memory fraction and the allocator APIs
(memory_checks.py, CUDA as the oracle on a GPU); device profiles (the GPU the emulated device
presents, its memory reserved on demand past the host's); the caching allocator's statistics under a
profile; the preflight at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from emulated_run import REAL_CUDA, ROOT, run_checks, run_python

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_checks  # noqa: E402

GiB = 2**30


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain() -> dict:
    return run_checks("memory_checks")


@pytest.fixture(scope="module")
def profiled() -> dict:
    os.environ["CUDASHIM_PROFILE"] = "h200"  # read by the shimmed child only (a GPU run has no shim)
    try:
        return run_checks("memory_checks")
    finally:
        del os.environ["CUDASHIM_PROFILE"]


@pytest.mark.parametrize("name", memory_checks.COMMON)
def test_check_without_profile(plain: dict, name: str) -> None:
    assert plain[name]["ok"], plain[name]["detail"]


@pytest.mark.parametrize("name", list(memory_checks.CHECKS))
def test_check_under_profile(profiled: dict, name: str) -> None:
    assert profiled[name]["ok"], profiled[name]["detail"]


PROPERTIES = r"""
import json, torch
p = torch.cuda.get_device_properties(0)
print(json.dumps({"name": p.name, "cap": list(torch.cuda.get_device_capability()), "sms": p.multi_processor_count,
                  "total": p.total_memory, "info_total": torch.cuda.mem_get_info()[1], "l2": p.L2_cache_size,
                  "optin": p.shared_memory_per_block_optin, "dev_name": torch.cuda.get_device_name(0)}))
"""


@pytest.mark.skipif(REAL_CUDA, reason="the profile is the emulated device's")
def test_profile_presents_the_gpu() -> None:
    r = run_python(["-c", PROPERTIES], {"CUDASHIM_PROFILE": "h100-80gb"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = _last_json(r.stdout)
    assert got == {"name": "NVIDIA H100 80GB HBM3", "cap": [9, 0], "sms": 132, "total": 84944093184,
                   "info_total": 84944093184, "l2": 52428800, "optin": 232448, "dev_name": "NVIDIA H100 80GB HBM3"}


BEYOND_HOST = r"""
import json, resource, torch
x = torch.empty(70 * 10**9, dtype=torch.uint8, device="cuda")   # more than this host has
x[: 10**9].fill_(1)                                              # 1 GB of it touched
out = {"allocated": torch.cuda.memory_allocated(), "free": torch.cuda.mem_get_info()[0],
       "ends": [int(x[0].item()), int(x[10**9 - 1].item()), int(x[10**9].item() == 1)],
       "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
try:
    torch.empty(90 * 10**9, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    out["oom"] = str(e)
out["num_ooms"] = torch.cuda.memory_stats()["num_ooms"]
print(json.dumps(out))
"""


@pytest.mark.skipif(REAL_CUDA, reason="the profile is the emulated device's")
def test_profile_memory_beyond_the_host() -> None:
    r = run_python(["-c", BEYOND_HOST], {"CUDASHIM_PROFILE": "h100-80gb"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = _last_json(r.stdout)
    seventy = 70_000_836_608  # 70 GB rounded up to 2 MiB, as CUDA rounds a large request
    total = 84_944_093_184    # h100-80gb.toml
    assert got["allocated"] == seventy and got["free"] == total - seventy, got
    assert got["ends"][:2] == [1, 1]
    assert got["maxrss_kb"] < 8 * 2**20, got["maxrss_kb"]  # the untouched 69 GB never became resident
    # 90 GB do not fit whatever is free: CUDA's message, with the sizes CUDA would print
    assert got["oom"].startswith("CUDA out of memory. Tried to allocate 83.82 GiB. GPU 0 has a total capacity of "
                                 "79.11 GiB of which 13.92 GiB is free."), got["oom"]
    assert got["num_ooms"] == 1
    # the preflight at exit: the peak, the largest request and the first that did not fit, with their lines
    pre = [ln for ln in r.stderr.splitlines() if ln.startswith("cudashim preflight")]
    assert len(pre) == 1, r.stderr[-2000:]
    assert pre[0].startswith("cudashim preflight (h100-80gb, cuda:0, 79.11 GiB): peak allocated 65.19 GiB at "
                             "<string>:3 (<module>); peak reserved 65.19 GiB at <string>:3 (<module>); largest "
                             "allocation 65.19 GiB at <string>:3 (<module>); DOES NOT FIT: first allocation past the "
                             "device's memory 83.82 GiB at <string>:9 (<module>)"), pre


@pytest.mark.skipif(REAL_CUDA, reason="the profile is the emulated device's")
def test_profile_refusals() -> None:
    # an NPU profile for the cuda device, and the allocator APIs the device does not keep
    code = ("import torch\n"
            "from cudashim.errors import CapabilityError\n"
            "for f in (lambda: torch.cuda.MemPool(use_on_oom=True), lambda: torch.cuda.memory._record_memory_history()):\n"
            "    try: f()\n"
            "    except CapabilityError as e: print('refused', str(e)[:60])\n")
    r = run_python(["-c", code])
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("refused") == 2, r.stdout
    r = run_python(["-c", "import torch; torch.zeros(1, device='cuda')"], {"CUDASHIM_PROFILE": "ascend910b2"})
    assert r.returncode != 0 and "is a npu profile (Ascend910B2)" in r.stderr and "h100-80gb" in r.stderr, r.stderr[-2000:]


def test_run_refuses_an_unknown_profile() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    r = subprocess.run([sys.executable, "-m", "cudashim", "run", "--profile", "h900", "-c", "pass"], cwd=ROOT,
                       env=dict(env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "--profile: device profile 'h900' is not one cudashim ships; use one of: a100-40gb" in r.stderr, r.stderr


@pytest.mark.skipif(REAL_CUDA, reason="the profile is the emulated device's")
def test_preflight_in_the_report(tmp_path) -> None:
    report = tmp_path / "report.json"
    code = ("import torch\n"
            "a = torch.empty(2**30, dtype=torch.uint8, device='cuda')\n"
            "b = torch.empty(3 * 2**20, dtype=torch.uint8, device='cuda')\n")
    r = run_python(["-c", code], {"CUDASHIM_PROFILE": "rtx4090", "CUDASHIM_REPORT": str(report)})
    assert r.returncode == 0, r.stderr[-3000:]
    mem = json.loads(report.read_text())["memory"]
    assert (mem["profile"], mem["name"], mem["total_memory"]) == ("rtx4090", "NVIDIA GeForce RTX 4090", 25382879232)
    dev = mem["devices"]["cuda:0"]
    # 1 GiB in a segment of its own; 3 MiB split from a 20 MiB segment: reserved 1 GiB + 20 MiB
    assert dev["peak_allocated"] == {"bytes": 2**30 + 3 * 2**20, "site": "<string>:3 (<module>)"}
    assert dev["peak_reserved"] == {"bytes": 2**30 + 20 * 2**20, "site": "<string>:3 (<module>)"}
    assert dev["largest_allocation"] == {"bytes": 2**30, "site": "<string>:2 (<module>)"}
    assert dev["fits"] is True and "first_not_fitting" not in dev


def test_cublas_workspace_sizes_follow_pytorch() -> None:
    # aten/src/ATen/cuda/CublasHandlePool.cpp: ":4096:8" (32 MiB) on compute capability 9.0, else
    # ":4096:2:16:8"; cuBLASLt 1024 KiB, capped at cuBLAS's, none of its own when unified
    from cudashim.emulated.memory import blas_workspace_sizes

    MiB = 2**20
    assert blas_workspace_sizes(9, 0, {}) == (32 * MiB, MiB)
    assert blas_workspace_sizes(8, 0, {}) == (8 * MiB + 128 * 1024, MiB)
    assert blas_workspace_sizes(10, 0, {}) == (8 * MiB + 128 * 1024, MiB)
    assert blas_workspace_sizes(8, 0, {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}) == (32 * MiB, MiB)
    assert blas_workspace_sizes(9, 0, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) == (128 * 1024, 128 * 1024)
    assert blas_workspace_sizes(9, 0, {"CUBLASLT_WORKSPACE_SIZE": "4096"}) == (32 * MiB, 4 * MiB)
    assert blas_workspace_sizes(9, 0, {"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "1"}) == (32 * MiB, 0)
    assert blas_workspace_sizes(9, 0, {"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "0",
                                       "CUBLASLT_WORKSPACE_SIZE": "65536"}) == (32 * MiB, 64 * MiB)


EXPANDABLE = r"""
import json, torch
MiB = 2**20
seen = []
def note():
    seen.append([torch.cuda.memory_allocated(), torch.cuda.memory_reserved()])
a = torch.empty(MiB + 1, dtype=torch.uint8, device="cuda"); note()     # large pool: one 20 MiB page mapped
b = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda"); note()     # in the mapped rest
c = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda"); note()    # the free tail and one page more
d = torch.empty(1000, dtype=torch.uint8, device="cuda"); note()        # small pool: one 2 MiB page
del b; torch.cuda.empty_cache(); note()                                # no whole page free: nothing unmapped
del a, c; torch.cuda.empty_cache(); note()                             # the large segment's pages all free
del d; torch.cuda.empty_cache(); note()
print(json.dumps(seen))
"""


def test_expandable_segments_map_pages() -> None:
    # CUDACachingAllocator with expandable_segments:True: a pool's blocks live in one segment that
    # maps 20 MiB pages (large pool) or 2 MiB pages (small) as requests need them, every block split
    # down to 512 bytes; empty_cache() unmaps the whole pages inside free blocks
    r = run_python(["-c", EXPANDABLE], {"CUDASHIM_PROFILE": "h200", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert r.returncode == 0, r.stderr[-3000:]
    MiB = 2**20
    a, b, c, d = MiB + 512, 5 * MiB, 30 * MiB, 1024
    assert _last_json(r.stdout) == [
        [a, 20 * MiB], [a + b, 20 * MiB], [a + b + c, 40 * MiB], [a + b + c + d, 42 * MiB],
        [a + c + d, 42 * MiB], [d, 2 * MiB], [0, 0]], r.stdout


EXPANDABLE_BEST_FIT = r"""
import json, torch
MiB = 2**20
u8 = lambda n: torch.empty(n, dtype=torch.uint8, device="cuda")
x = u8(8 * MiB)      # the large pool's first 20 MiB page: x, then a free 12 MiB that ends at unmapped space
y = u8(6 * MiB)      # from that block: 6 MiB free left at the end of the mapped pages
del x                # a free 8 MiB block at the start, inside the mapped pages
z = u8(5 * MiB)      # fits both; the 8 MiB block, since the end block counts as large as it can grow
w = u8(7 * MiB)      # 3 MiB and 6 MiB left free: no fit, so the end block grows by a page
print(json.dumps([torch.cuda.memory_allocated(), torch.cuda.memory_reserved()]))
"""


def test_expandable_segments_best_fit_counts_growth() -> None:
    # CUDACachingAllocator's get_free_block: with expandable segments, a free block followed by the
    # segment's unmapped range counts as large as it can grow, so a smaller-looking free block elsewhere
    # that fits is taken first and the end block stays for requests nothing else fits
    r = run_python(["-c", EXPANDABLE_BEST_FIT],
                   {"CUDASHIM_PROFILE": "h200", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert r.returncode == 0, r.stderr[-3000:]
    MiB = 2**20
    # z at the start (3 MiB left there), w in the 6 MiB end block grown by one 20 MiB page
    assert _last_json(r.stdout) == [18 * MiB, 40 * MiB], r.stdout


COMPILED_AUTOTUNE = r"""
import json, torch
MiB = 2**20
seen = []
def note():
    seen.append([torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.max_memory_allocated()])
f = torch.compile(lambda x: x * 2 + 1)
x = torch.ones(MiB // 4, device="cuda")                # 1 MiB: a 2 MiB segment of the small pool
torch.cuda.reset_peak_memory_stats()
y = f(x); note()                                       # first launch: autotuned
del y; y = f(x); note()                                # tuned: nothing more
l2 = torch.cuda.get_device_properties(0).L2_cache_size
print(json.dumps({"l2": l2, "seen": seen, "segments": sorted(s["total_size"] for s in torch.cuda.memory_snapshot())}))
"""

COMPILED_MUTATION = r"""
import json, torch
MiB = 2**20
@torch.compile
def bump(x):
    x.add_(1)
big = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda"); del big   # a cached 64 MiB segment; peak 64 MiB
x = torch.zeros(MiB, device="cuda")                                     # 4 MiB, from that segment
bump(x)
large = torch.cuda.memory_stats()["reserved_bytes.large_pool.current"]  # (compiling allocates small tensors too)
print(json.dumps([torch.cuda.memory_allocated(), large, torch.cuda.max_memory_allocated()]))
"""


def _compiled_run(code: str, cache) -> dict:
    r = run_python(["-c", code], {"CUDASHIM_PROFILE": "h200", "TORCHINDUCTOR_CACHE_DIR": str(cache),
                                  "TRITON_CACHE_DIR": str(cache / "triton")})
    assert r.returncode == 0, r.stderr[-3000:]
    return _last_json(r.stdout)


def test_compiled_kernel_autotunes_at_first_launch(tmp_path) -> None:
    # a Triton kernel with more than one config is benchmarked at its first launch, and
    # InductorBenchmarker.benchmark_gpu flushes the L2 cache with an int32 buffer of its size (the
    # h200's 60 MiB), allocated while the kernel's input and output are, then freed and kept cached
    MiB = 2**20
    got = _compiled_run(COMPILED_AUTOTUNE, tmp_path / "inductor")
    l2 = got["l2"]
    assert REAL_CUDA or l2 == 60 * MiB  # the h200 profile's L2 cache
    assert got["seen"] == [[2 * MiB, 2 * MiB + l2, 2 * MiB + l2]] * 2, got
    assert got["segments"] == [2 * MiB, l2], got
    # a second process finds the autotuned choice in the cache and benchmarks nothing
    again = _compiled_run(COMPILED_AUTOTUNE, tmp_path / "inductor")
    assert again["seen"] == [[2 * MiB, 2 * MiB, 2 * MiB]] * 2, again


def test_compiled_kernel_autotuning_clones_mutated_args(tmp_path) -> None:
    # CachingAutotuner.bench clones the arguments a kernel mutates for every launch, while the clone
    # stays under the peak allocated memory (copy_args_to_cpu_if_needed): x (4 MiB) from the cached
    # 64 MiB segment; x.add_(1) reads x as an input and writes it as an output, two mutated arguments
    # cloned each: the clones from the 60 MiB left, then, with the flush buffer holding those 60 MiB,
    # from a new 20 MiB segment (the large pool's reserved memory: 64 + 20 MiB; the peak: x, two
    # clones and the flush buffer)
    MiB = 2**20
    got = _compiled_run(COMPILED_MUTATION, tmp_path / "inductor")
    assert got == [4 * MiB, 84 * MiB, 72 * MiB], got


MEMPOOL = r"""
import json, torch
MiB = 2**20
pool = torch.cuda.MemPool()
out = [pool.use_count()]
with torch.cuda.use_mem_pool(pool):
    out.append(pool.use_count())
    x = torch.empty(MiB, dtype=torch.uint8, device="cuda")   # the pool's own 2 MiB segment
y = torch.empty(MiB, dtype=torch.uint8, device="cuda")       # the default pool's: x's segment is the pool's
out += [pool.use_count(), torch.cuda.memory_reserved(), sorted(seg["total_size"] for seg in pool.snapshot())]
del x
torch.cuda.empty_cache()                                     # the pool lives: its segment stays
out.append(torch.cuda.memory_reserved())
del pool                                                     # its free segment goes back with it
out.append(torch.cuda.memory_reserved())
print(json.dumps(out))
"""


def test_mem_pool_takes_allocations_into_its_own_segments() -> None:
    # torch.cuda.MemPool / use_mem_pool: the thread's allocations go to the pool (segments of its own,
    # reserved while it lives); the pool counts its creator and each use_mem_pool block as users
    r = run_python(["-c", MEMPOOL], {"CUDASHIM_PROFILE": "h200"})
    assert r.returncode == 0, r.stderr[-3000:]
    MiB = 2**20
    assert _last_json(r.stdout) == [1, 2, 1, 4 * MiB, [2 * MiB], 4 * MiB, 2 * MiB], r.stdout
