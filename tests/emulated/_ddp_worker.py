"""One rank of test_distributed.py's DDP test: a CUDA-written DDP step on cuda tensors."""

import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl")
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
x = torch.full((3, 4), float(rank + 1), device="cuda")
ddp(x).sum().backward()
# the gradient is the mean over ranks of each rank's own: d(sum(Wx+b))/dW = column sums of x
want = torch.full((2, 4), 3.0 * (1 + 2) / 2, device="cuda")
assert model.weight.grad.is_cuda and torch.allclose(model.weight.grad, want), model.weight.grad
dist.destroy_process_group()
print(f"rank {rank} ok")
