"""One rank of test_distributed.py: NCCL-written collectives on cuda tensors (Gloo under the shim)."""

import os

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl")
n = 3
x = torch.full((n,), float(rank + 1), device="cuda")
flat = torch.empty(world * n, device="cuda")
dist.all_gather_into_tensor(flat, x)
assert flat.is_cuda and flat.tolist() == [float(r + 1) for r in range(world) for _ in range(n)], flat
stacked = torch.empty(world, n, device="cuda")
dist.all_gather_into_tensor(stacked, x)
assert torch.equal(stacked.flatten(), flat)
out = torch.empty(n, device="cuda")
dist.reduce_scatter_tensor(out, torch.arange(world * n, dtype=torch.float32, device="cuda"))
assert out.tolist() == [float(world * (rank * n + i)) for i in range(n)], out
y = torch.ones(2, device="cuda") * (rank + 1)
dist.all_reduce(y)
assert y.is_cuda and y.tolist() == [float(sum(range(1, world + 1)))] * 2
dist.barrier(device_ids=[torch.cuda.current_device()])
dist.destroy_process_group()
print(f"rank {rank} ok")
