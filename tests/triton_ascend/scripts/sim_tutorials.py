"""Run on the simulated NPU with the report and CUDASHIM_TRITON_ASCEND_COMPILE=1: the patterns of Triton's
tutorials as pinned libraries ship them (tests/triton_route/test_corpus.py: fla-core's vector add and autotuned
matmul with a nested activation, Liger-Kernel's fused softmax, trinix's layer norm forward and backward with its
atomic lock), through the libraries' own host functions, and nano-vllm's store_kvcache kernel, each against
torch. One JSON line at the end: case -> max abs error against the torch reference."""

from __future__ import annotations

import json

import torch
import triton

# the first host line of Triton's tutorials, as they write it
DEVICE = triton.runtime.driver.active.get_active_torch_device()

from fla.modules.causal_conv1d.backends.triton_ascend import _launch_add  # noqa: E402
from fla.ops.utils.matmul import matmul  # noqa: E402
from liger_kernel.ops.softmax import LigerSoftmaxFunction  # noqa: E402
from trinix.kernels.layernorm_kernel import TritonLayerNormFunction  # noqa: E402

torch.manual_seed(0)
out: dict[str, float] = {}
x, y = torch.rand(4096, device=DEVICE), torch.rand(4096, device=DEVICE)
out["vector add"] = float((_launch_add(x, y) - (x + y)).abs().max())
rows = torch.randn(64, 781, device="cuda")
out["fused softmax"] = float((LigerSoftmaxFunction.apply(rows) - torch.softmax(rows, dim=1)).abs().max())
# rows of 1100 make 128 lock groups: with 140 rows, 12 of them take the lock a second time and accumulate
xs = torch.randn(140, 1100, device="cuda", requires_grad=True)
w = torch.rand(1100, device="cuda", requires_grad=True)
b = torch.rand(1100, device="cuda", requires_grad=True)
ln = TritonLayerNormFunction.apply(xs, w, b, 1e-5)
ref = torch.nn.functional.layer_norm(xs, (1100,), w, b, 1e-5)
out["layer norm forward"] = float((ln - ref).abs().max().detach())
dy = torch.randn_like(ln)
grads = torch.autograd.grad(ln, (xs, w, b), dy)
ref_grads = torch.autograd.grad(ref, (xs, w, b), dy)
out["layer norm backward"] = max(float((g - r).abs().max()) for g, r in zip(grads, ref_grads))
a16, b16 = torch.randn(256, 256, device="cuda", dtype=torch.float16), torch.randn(256, 256, device="cuda", dtype=torch.float16)
out["matmul"] = float((matmul(a16, b16, "leaky_relu").float()
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
