"""One rank of test_distributed.py: NCCL-written collectives on cuda tensors (Gloo under the shim), and
what NCCL-written code observes of its groups (backend name, options, NCCL version)."""

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

# what NCCL-written code asks of its groups, answered as on a GPU, so it takes its NCCL branch
assert dist.is_nccl_available() and dist.get_default_backend_for_device("cuda") == "nccl"
assert dist.get_backend() == dist.Backend.NCCL, dist.get_backend()
assert dist.get_backend_config() == "cuda:nccl", dist.get_backend_config()
assert dist.group.WORLD.name() == "nccl", dist.group.WORLD.name()
version = torch.cuda.nccl.version()  # torch's profiler and c10d's logger ask it of any "nccl" group
assert isinstance(version, tuple) and version[:2] >= (2, 0), version
opts = dist.ProcessGroupNCCL.Options(is_high_priority_stream=True)
opts.config.max_ctas = 4
tuned = dist.new_group(backend="nccl", pg_options=opts)
inherited = dist.new_group()  # the default group's backend
assert dist.get_backend(tuned) == dist.get_backend(inherited) == "nccl"
z = torch.ones(2, device="cuda")
dist.all_reduce(z, group=tuned)
dist.all_reduce(z, group=inherited)
assert z.tolist() == [float(world * world)] * 2, z
# torch 2.13's name for all_gather_into_tensor (which, with _all_gather_base, calls it): the stacked
# and (1, world * n) outputs NCCL takes (SyncBatchNorm's NCCL branch gathers into the latter)
gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
for shape in ((world, n), (1, world * n)):
    buf = torch.empty(shape, device="cuda")
    gather(buf, x)
    assert torch.equal(buf.flatten(), flat), (shape, buf)
dist.destroy_process_group()
print(f"rank {rank} ok")
