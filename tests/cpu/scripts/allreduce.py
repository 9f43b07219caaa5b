"""An NCCL-written all-reduce, as torchrun programs are written: set_device(local_rank), "nccl", cuda tensors."""

import json
import os
import sys

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
rank = dist.get_rank()
t = torch.full((4,), float(rank + 1), device="cuda")
dist.all_reduce(t)
dist.barrier(device_ids=[local_rank])
sys.stdout.write("RESULT " + json.dumps({"rank": rank, "world": dist.get_world_size(), "sum": t.tolist(),
                              "backend": dist.get_backend(), "device_count": torch.cuda.device_count(),
                              "current_device": torch.cuda.current_device()}) + "\n")
sys.stdout.flush()
dist.destroy_process_group()
