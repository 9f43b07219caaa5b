"""One rank of a pre-training framework's step, as such frameworks write it for CUDA: a small decoder whose
attention is compiled flex_attention with a causal block mask (the framework's default), its parameters
made on the meta device, sharded with FSDP2's fully_shard on a one-device mesh, materialized with to_empty,
trained with AdamW. `python _flex_train_worker.py flex` runs it; `... sdpa` runs the same program with
causal scaled_dot_product_attention in place of flex attention, the oracle for its numbers. Prints
`rank R ok losses [...]` (each step's loss)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

attention = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (dist.get_world_size(),))
SEQ, DIM, HEADS = 128, 32, 4
compiled_flex = torch.compile(flex_attention)  # as the framework compiles it, once


def causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    return q >= kv


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(DIM, 3 * DIM, bias=False)
        self.proj = torch.nn.Linear(DIM, DIM, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.SiLU(), torch.nn.Linear(4 * DIM, DIM))
        self.norm1, self.norm2 = torch.nn.RMSNorm(DIM), torch.nn.RMSNorm(DIM)

    def forward(self, x: torch.Tensor, mask: object) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        if attention == "flex":
            y = compiled_flex(q, k, v, block_mask=mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, DIM)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.out = torch.nn.Linear(DIM, 64, bias=False)

    def forward(self, tokens: torch.Tensor, mask: object) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.out(x)


with torch.device("meta"):
    model = Decoder()
for block in model.blocks:
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)
model.to_empty(device="cuda")
torch.manual_seed(0)
with torch.no_grad():
    for p in model.parameters():
        p.normal_(0, 0.05) if p.dim() > 1 else p.fill_(1.0)
mask = create_block_mask(causal, None, None, SEQ, SEQ, device="cuda")
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
data = torch.Generator().manual_seed(1)
tokens = torch.randint(0, 64, (2, SEQ + 1), generator=data).cuda()
losses = []
for step in range(6):
    logits = model(tokens[:, :-1], mask)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
dist.destroy_process_group()
print(f"rank {rank} ok losses {losses!r}")
