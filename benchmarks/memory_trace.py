"""The caching allocator's statistics after every step of fixed programs, for comparing a GPU with the
emulated device under a profile.

    CUDASHIM_DISABLE=1 python benchmarks/memory_trace.py OUT.json                      # on the GPU
    python -m cudashim run --profile h200 benchmarks/memory_trace.py OUT.json          # emulated
    python benchmarks/memory_trace.py --compare GPU.json EMULATED.json

Two programs: "allocations", a fixed sequence of allocations and frees (sizes around every boundary of
the allocator: 512 bytes, 1 MiB, 10 MiB, 2 MiB rounding) followed by a seeded random one; and "mlp",
three training steps of a small MLP with AdamW (its kernels' own workspaces included). After each step
the JSON holds memory_allocated(), memory_reserved(), max_memory_allocated() and max_memory_reserved().
--compare prints, per program, the steps whose four numbers differ (and exits 1 when any do).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any, Callable

MiB = 2**20
BOUNDARY_SIZES = [1, 511, 512, 513, 1000, 4096, MiB - 1, MiB, MiB + 1, 2 * MiB, 5 * MiB, 9 * MiB + 900 * 1024,
                  10 * MiB, 10 * MiB + 1, 19 * MiB + MiB // 2, 20 * MiB, 33 * MiB, 100 * MiB, 513 * MiB]


def _numbers(torch: Any) -> list[int]:
    return [torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.max_memory_allocated(),
            torch.cuda.max_memory_reserved()]


def allocations(torch: Any, record: Callable[[str], None]) -> None:
    live: list[Any] = []

    def alloc(n: int) -> None:
        live.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        record(f"alloc {n}")

    for n in BOUNDARY_SIZES:
        alloc(n)
    for i in range(len(live) - 1, -1, -2):  # every other one, from the end
        del live[i]
        record(f"free #{i}")
    for n in (3 * MiB, 700, 15 * MiB, 64 * MiB):
        alloc(n)
    torch.cuda.empty_cache()
    record("empty_cache")
    live.clear()
    record("free all")
    torch.cuda.empty_cache()
    record("empty_cache")
    rng = random.Random(0)
    for step in range(400):
        if live and rng.random() < 0.4:
            del live[rng.randrange(len(live))]
            record("free")
        else:
            alloc(int(2 ** rng.uniform(0, 27)))  # 1 byte .. 128 MiB, log-uniform
        if step % 100 == 99:
            torch.cuda.empty_cache()
            record("empty_cache")
    live.clear()
    record("free all")


def mlp(torch: Any, record: Callable[[str], None]) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
    record("model")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    x = torch.randn(64, 256, device="cuda")
    record("input")
    for step in range(3):
        loss = model(x).square().mean()
        record(f"forward {step}")
        loss.backward()
        record(f"backward {step}")
        opt.step()
        record(f"step {step}")
        opt.zero_grad(set_to_none=True)
        del loss
        record(f"zero_grad {step}")


def main(out: str) -> None:
    import torch

    result: dict[str, Any] = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "programs": {}}
    for name, program in (("allocations", allocations), ("mlp", mlp)):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        steps: list[list[Any]] = []
        program(torch, lambda label: steps.append([label, *_numbers(torch)]))
        result["programs"][name] = {"columns": ["step", "allocated", "reserved", "max_allocated", "max_reserved"],
                                    "steps": steps}
    with open(out, "w") as f:
        json.dump(result, f, indent=0)
    counts = ", ".join(f"{k} {len(v['steps'])} steps" for k, v in result["programs"].items())
    print(f"wrote {out}: {counts}")


def compare(a_path: str, b_path: str) -> int:
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    bad = 0
    for name, prog in a["programs"].items():
        other = b["programs"].get(name, {"steps": []})["steps"]
        diffs = [(i, s, t) for i, (s, t) in enumerate(zip(prog["steps"], other)) if s != t]
        same = len(prog["steps"]) == len(other) and not diffs
        print(f"{name}: {len(prog['steps'])} steps, {'equal' if same else f'{len(diffs)} differ'}")
        for i, s, t in diffs[:10]:
            print(f"  step {i}: {s} != {t}")
        bad += not same
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
