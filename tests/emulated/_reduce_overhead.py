"""torch.compile(mode="reduce-overhead") on cuda tensors: prints "ran" or the error it raises."""

import torch


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(-1)


x = torch.randn(8, 16, device="cuda")
w = torch.randn(16, 16, device="cuda")
cf = torch.compile(f, mode="reduce-overhead")
try:
    for _ in range(3):
        y = cf(x, w)
    print("ran", torch.allclose(y, f(x, w)))
except Exception as e:  # noqa: BLE001 - reported
    print("ERR", type(e).__name__, str(e)[:800])
