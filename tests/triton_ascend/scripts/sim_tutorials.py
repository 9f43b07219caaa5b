"""Run on the simulated NPU with the report and CUDASHIM_TRITON_ASCEND_COMPILE=1: the Triton tutorials' kernels
(tests/triton_route/tutorial_kernels.py, through their own host functions: the autotuned matmul takes its first
configuration, 128x256x64) and nano-vllm's store_kvcache kernel, each against torch. One JSON line at the end:
case -> max abs error against the torch reference."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "triton_route"))
import tutorial_kernels as T  # noqa: E402

torch.manual_seed(0)
out: dict[str, float] = {}
x, y = torch.rand(4096, device="cuda"), torch.rand(4096, device="cuda")
out["vector add"] = float((T.add(x, y) - (x + y)).abs().max())
rows = torch.randn(64, 781, device="cuda")
out["fused softmax"] = float((T.softmax(rows) - torch.softmax(rows, dim=1)).abs().max())
xs = torch.randn(32, 512, device="cuda", requires_grad=True)
w = torch.rand(512, device="cuda", requires_grad=True)
b = torch.rand(512, device="cuda", requires_grad=True)
ln = T.layer_norm(xs, (512,), w, b, 1e-5)
ref = torch.nn.functional.layer_norm(xs, (512,), w, b, 1e-5)
out["layer norm forward"] = float((ln - ref).abs().max().detach())
dy = torch.randn_like(ln)
grads = torch.autograd.grad(ln, (xs, w, b), dy)
ref_grads = torch.autograd.grad(ref, (xs, w, b), dy)
out["layer norm backward"] = max(float((g - r).abs().max()) for g, r in zip(grads, ref_grads))
a16, b16 = torch.randn(256, 256, device="cuda", dtype=torch.float16), torch.randn(256, 256, device="cuda", dtype=torch.float16)
out["matmul"] = float((T.matmul(a16, b16, "leaky_relu").float()
                       - torch.nn.functional.leaky_relu(a16.float() @ b16.float(), 0.01)).abs().max())

# nano-vllm's own kernel; its module imports flash_attn, which the shim stands in on this platform
from nanovllm.layers.attention import store_kvcache  # noqa: E402

key, value = (torch.randn(6, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
# nano-vllm's cache layout: [blocks, block_size, kv heads, head_dim]
k_cache, v_cache = (torch.zeros(4, 8, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
slots = torch.tensor([3, 9, -1, 0, 17, 31], device="cuda", dtype=torch.int32)
store_kvcache(key, value, k_cache, v_cache, slots)
keep, flat_k, flat_v = slots >= 0, k_cache.view(32, 1024), v_cache.view(32, 1024)
out["nano-vllm store_kvcache"] = float((flat_k[slots[keep].long()] - key[keep].reshape(-1, 1024)).abs().max()
                                       + (flat_v[slots[keep].long()] - value[keep].reshape(-1, 1024)).abs().max())
print(json.dumps(out))
