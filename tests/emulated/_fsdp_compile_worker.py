"""One rank of test_distributed.py's FSDP2 + torch.compile test: a CUDA-written training loop of a small
attention model (scaled_dot_product_attention, causal), its parameters created on the meta device,
sharded with fully_shard, materialized with to_empty and initialized by random operators on the
DTensor parameters (DTensor's RNG tracker: each shard from its own Philox offset), each block compiled.

`python _fsdp_compile_worker.py cuda WEIGHTS` is the CUDA program (NCCL; the emulated device under the
shim): rank 0 writes the initial full parameters to WEIGHTS. `python _fsdp_compile_worker.py cpu WEIGHTS`
is the same program on CPU tensors with Gloo, run by plain torch as the oracle: DTensor's random
operators need a CUDA-like generator, so it starts from the weights in WEIGHTS instead of drawing them.
Prints one line per rank: `rank R ok losses [...]` (the loss averaged over ranks, each step)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

dev, weights = sys.argv[1], sys.argv[2]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if dev == "cuda":
    torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl" if dev == "cuda" else "gloo")
mesh = init_device_mesh(dev, (world,))


class Block(torch.nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(), torch.nn.Linear(2 * dim, dim))
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


torch.manual_seed(0)
with torch.device("meta"):
    model = torch.nn.Sequential(Block(), Block(), torch.nn.Linear(16, 4))
for block in (model[0], model[1]):
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)
model.to_empty(device=dev)
if dev == "cuda":
    with torch.no_grad():
        for p in model.parameters():  # random operators on DTensors: DTensor's RNG tracker
            torch.nn.init.uniform_(p, -0.3, 0.3)
    first = model[0].qkv.weight
    assert isinstance(first, DTensor) and first.to_local().is_cuda
    state = torch.cuda.get_rng_state()
    assert state.numel() == 16 and int(state[8:].view(torch.int64).item()) > 0  # the tracker moved the offset
    full = {name: p.full_tensor().cpu() for name, p in model.named_parameters()}
    if rank == 0:
        torch.save(full, weights)
    dist.barrier()
else:
    dist.barrier()  # (the device run wrote the file before this program started)
    full = torch.load(weights)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(distribute_tensor(full[name], mesh, p.placements))
for block in (model[0], model[1]):
    block.compile()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
data = torch.Generator().manual_seed(rank)  # each rank its own batches, drawn on the host
losses = []
for step in range(3):
    x, y = torch.randn(2, 8, 16, generator=data).to(dev), torch.randn(2, 8, 4, generator=data).to(dev)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    total = loss.detach().clone()
    dist.all_reduce(total)
    losses.append((total / world).item())
dist.destroy_process_group()
print(f"rank {rank} ok losses {losses!r}")
