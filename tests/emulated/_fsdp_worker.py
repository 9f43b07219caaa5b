"""One rank of test_distributed.py's FSDP2 test: a CUDA-written FSDP2 (fully_shard) training loop.

`python _fsdp_worker.py cuda` is the CUDA program (NCCL; the emulated device under the shim); `python
_fsdp_worker.py cpu` is the same program on CPU tensors with Gloo, run by plain torch as the oracle.
Prints one line per rank: `rank R ok losses [...]` (the loss averaged over ranks, each step)."""

import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

dev = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if dev == "cuda":
    torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl" if dev == "cuda" else "gloo")
mesh = init_device_mesh(dev, (world,))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
data = torch.Generator().manual_seed(rank)  # each rank its own batches, drawn on the host
losses = []
for step in range(4):
    x, y = torch.randn(5, 8, generator=data).to(dev), torch.randn(5, 4, generator=data).to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    total = loss.detach().clone()
    dist.all_reduce(total)
    losses.append((total / world).item())
weight = model[0].weight
assert isinstance(weight, DTensor) and weight.to_local().device.type == dev, (type(weight), weight.device)
assert weight.to_local().shape == (16 // world, 8), weight.to_local().shape  # sharded: each rank holds its rows
# resharded after the step: the unsharded parameter's storage was freed (UntypedStorage.resize_(0))
unsharded = model[0]._get_fsdp_state()._fsdp_param_group.fsdp_params[0]._unsharded_param
assert unsharded.untyped_storage().size() == 0, unsharded.untyped_storage().size()
dist.destroy_process_group()
print(f"rank {rank} ok losses {losses!r}")
