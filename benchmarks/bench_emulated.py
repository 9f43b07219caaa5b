"""Per-op overhead of the emulated CUDA device over the same op on CPU tensors, in µs.

    CUDASHIM_CPU_BACKEND=device python -m cudashim run benchmarks/bench_emulated.py   (about a minute)

Same process, same run: each op is timed on CPU tensors and on cuda tensors of the emulated device,
alternating rounds (so load on a shared machine falls on both alike); the figure is the median over
rounds of (cuda time - cpu time) per call. Goal: <= 0.5 µs. What bounds it: an op without a kernel of
its own reaches the CPU kernel through the boxed fallback (arguments boxed into a stack, one CPU view
— a TensorImpl and a StorageImpl — per tensor argument, the output re-wrapped as a cuda tensor), so
the overhead is a few allocations and a boxed call, independent of the tensor size.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable

import torch


def _per_call(fn: Callable[[], object], n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def measure(name: str, make: Callable[[str], Callable[[], object]], n: int, rounds: int) -> tuple[str, float, float, float]:
    cpu, dev = make("cpu"), make("cuda")
    for f in (cpu, dev):
        _per_call(f, max(1, n // 10))  # warm-up
    diffs, cpus = [], []
    for _ in range(rounds):
        c = _per_call(cpu, n)
        d = _per_call(dev, n)
        diffs.append(d - c)
        cpus.append(c)
    return name, statistics.median(cpus), statistics.median(cpus) + statistics.median(diffs), statistics.median(diffs)


def main() -> int:
    if not (torch.cuda.is_available() and torch.version.cuda is None):
        print("run under the emulated device: CUDASHIM_CPU_BACKEND=device python -m cudashim run "
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

    rows = [measure("add (16 elements)", small_add, 2000, 15), measure("matmul 64x64", mm(64), 1000, 15),
            measure("softmax 64x64", softmax, 1000, 15), measure("matmul 1024x1024", mm(1024), 3, 7)]
    print(f"{'op':<20} {'cpu µs':>10} {'cuda µs':>10} {'overhead µs':>12}")
    for name, c, d, diff in rows:
        print(f"{name:<20} {c:>10.2f} {d:>10.2f} {diff:>12.2f}")
    print("goal: overhead <= 0.5 µs per op (median over alternating rounds; 1 thread)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
