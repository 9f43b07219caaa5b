"""Per-op overhead of the emulated CUDA device over the same op on CPU tensors, in µs.

    python -m cudashim run --platform cpu benchmarks/bench_emulated.py   (about a minute)

Same process, same run: each op is timed on CPU tensors and on cuda tensors of the emulated device,
alternating rounds (so load on a shared machine falls on both alike); the figure is the median over
rounds of (cuda time - cpu time) per call, in wall time and in this process's CPU time (on a machine
shared with other jobs the wall figure also counts the time the process waited for a core, which
grows with every extra instruction; the CPU-time figure leaves that out). Goal: <= 0.5 µs. What
bounds it: per call, one CPU view per tensor argument (a TensorImpl with the device tensor's metadata
copied, and a StorageImpl over its memory), the CPU kernel's output made a device tensor in place
(its memory adopted into the device's statistics: a small record and two atomic additions, again
when it is freed), and the dispatch to the CPU kernel. The hottest operators (csrc/ops/direct.cpp: add,
mul, mm, bmm, where, fill_, ...) reach their CPU kernels unboxed; every other one through the boxed
fallback (its arguments packed into a stack of IValues and unpacked again), which adds about
0.1 µs. Structured operators reach the fallback directly, not through their out= overload.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _results  # noqa: E402


def _per_call(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(wall µs, process CPU µs) per call"""
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6, (time.process_time() - c) / n * 1e6


def measure(name: str, make: Callable[[str], Callable[[], object]], n: int, rounds: int) -> tuple[str, float, float, float, float]:
    cpu, dev = make("cpu"), make("cuda")
    for f in (cpu, dev):
        _per_call(f, max(1, n // 10))  # warm-up
    diffs, cpus, cpu_diffs = [], [], []
    for _ in range(rounds):
        c, c_cpu = _per_call(cpu, n)
        d, d_cpu = _per_call(dev, n)
        diffs.append(d - c)
        cpu_diffs.append(d_cpu - c_cpu)
        cpus.append(c)
    med = statistics.median
    return name, med(cpus), med(cpus) + med(diffs), med(diffs), med(cpu_diffs)


def main() -> int:
    if not (torch.cuda.is_available() and torch.version.cuda is None):
        print("run under the emulated device: python -m cudashim run --platform cpu "
              "benchmarks/bench_emulated.py", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # one core: the figure is the dispatch overhead, not a thread pool's

    def small_add(dev: str) -> Callable[[], object]:
        a = torch.randn(16, device=dev)
        return lambda: a + a

    def mm(size: int) -> Callable[[str], Callable[[], object]]:
        def make(dev: str) -> Callable[[], object]:
            a = torch.randn(size, size, device=dev)
            return lambda: a @ a
        return make

    def softmax(dev: str) -> Callable[[], object]:
        a = torch.randn(64, 64, device=dev)
        return lambda: torch.softmax(a, -1)

    def boxed(dev: str) -> Callable[[], object]:  # no unboxed kernel of its own: the boxed fallback
        a = torch.randn(16, device=dev)
        return lambda: torch.cumsum(a, 0)

    rows = [measure("add (16 elements)", small_add, 2000, 15), measure("matmul 64x64", mm(64), 1000, 15),
            measure("softmax 64x64", softmax, 1000, 15), measure("matmul 1024x1024", mm(1024), 3, 7),
            measure("cumsum (16, boxed)", boxed, 2000, 15)]
    print(f"{'op':<20} {'cpu µs':>10} {'cuda µs':>10} {'overhead µs':>12} {'overhead, CPU time':>19}")
    for name, c, d, diff, cpu_diff in rows:
        print(f"{name:<20} {c:>10.2f} {d:>10.2f} {diff:>12.2f} {cpu_diff:>19.2f}")
    print("goal: overhead <= 0.5 µs per op (median over alternating rounds; 1 thread; wall, and the process's CPU time)")
    _results.record("emulated_per_op", {}, goal="overhead <= 0.5 µs per op",
                    table={"columns": ["op", "cpu µs", "cuda µs", "overhead µs (wall)", "overhead µs (CPU time)"],
                           "rows": [[n, round(c, 3), round(d, 3), round(w, 3), round(t, 3)] for n, c, d, w, t in rows]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
