"""A tiny program written for CUDA, unchanged: `python -m cudashim run examples/hello_cuda.py`.

On a CUDA machine it runs as it is; under the shim on cpu or ascend, torch.cuda is aliased to the
real device and "cuda" tensors land there.
"""

import torch

assert torch.cuda.is_available(), "this program needs CUDA"
device = torch.device("cuda")
a = torch.randn(64, 32, device=device)
b = torch.randn(32, 16, device="cuda")
c = a @ b
torch.cuda.synchronize()
expected = a.cpu().double() @ b.cpu().double()
err = (c.cpu().double() - expected).abs().max().item()
print(f"hello from {torch.cuda.get_device_name(0)}: ({c.shape[0]}x{c.shape[1]}) on {c.device}, "
      f"{torch.cuda.device_count()} device(s), max error {err:.2e}")
assert err < 1e-3, "matmul result is wrong"
