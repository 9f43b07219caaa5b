"""One rank of test_distributed.py's DTensor random init: DTensor's RNG tracker (OffsetBasedRNGTracker,
its _PhiloxState) reads and writes the device generator's state as CUDA's Philox (seed, offset), gives each
shard its own offset and moves every rank's offset past the whole tensor. Runs with any world size (one
rank on one GPU with real NCCL checks the state's layout against CUDA itself)."""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (world,))
torch.manual_seed(0)
dt = distribute_tensor(torch.zeros(8 * world, 4, device="cuda"), mesh, [Shard(0)])
torch.nn.init.uniform_(dt)  # a random op on a DTensor: run under DTensor's RNG tracker
state = torch.cuda.get_rng_state()
assert state.numel() == 16, state.numel()
seed, offset = int(state[:8].view(torch.int64).item()), int(state[8:].view(torch.int64).item())
assert (seed, offset) == (0, 32 * world), (seed, offset)  # past the whole tensor on every rank
local = dt.to_local()
assert local.is_cuda and bool(((local >= 0) & (local < 1)).all()) and local.unique().numel() == local.numel()
shards = [torch.empty_like(local) for _ in range(world)]
dist.all_gather(shards, local.contiguous())
for other in range(world):  # each shard drew from its own offset
    assert other == rank or not torch.equal(shards[other], local), (rank, other)
dist.barrier()
print(f"rank {rank} ok", flush=True)
dist.destroy_process_group()
