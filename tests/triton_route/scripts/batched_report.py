"""Launches on the emulated device that take each execution of the Triton route: run under
`cudashim run --platform cpu --report FILE`; prints one JSON line with each output's check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import batched_kernels as K  # noqa: E402

D = "cuda"
g = torch.Generator().manual_seed(0)
out: dict[str, bool] = {}

x, y = torch.randn(1000, generator=g).to(D), torch.randn(1000, generator=g).to(D)
o = torch.empty_like(x)
for _ in range(3):  # traced once, replayed twice
    K.axpy_kernel[(4,)](x, y, o, 1000, BLOCK_SIZE=256)
out["axpy"] = bool(torch.equal(o, 2 * x + y))

rows = torch.randn(6, 32, generator=g).to(D)
acc = torch.zeros(1, device=D)
K.atomic_sum_kernel[(6,)](rows, acc, BLOCK=32)
out["atomics"] = bool(torch.allclose(acc.cpu(), rows.cpu().sum().reshape(1), atol=1e-4))

loop = torch.zeros(40, 16, device=D)
K.divergent_loop_kernel[(40,)](loop, BLOCK=16)
ar = torch.arange(16, dtype=torch.float32)
out["divergent"] = bool(torch.equal(loop.cpu(), torch.stack([sum((ar + i) * 0.5 for i in range(p + 1)) for p in range(40)])))

v = torch.randint(0, 8, (4, 32), generator=g, dtype=torch.int32).to(D)
h = torch.zeros(4, 8, dtype=torch.int32, device=D)
K.histogram_kernel[(4,)](v, h, BLOCK=32, BINS=8)
out["histogram"] = bool(torch.equal(h.cpu(), torch.stack([torch.bincount(r, minlength=8).int() for r in v.cpu()])))
print(json.dumps(out))
