"""The emulated device runs the CPU's own kernels, so a `cuda` result is bit-identical to the same
operator on CPU tensors (one intra-op thread). That is the device's promise, not CUDA's: these tests
skip under real CUDA.

A CPU build of PyTorch fills the CUDA slot of an operator that has both a CPU kernel and a
CompositeExplicitAutograd (or CompositeImplicitAutograd) kernel with the composite (written for
backends without a kernel of their own): `native_layer_norm` then ran `math_native_layer_norm` on the
device (var_mean and friends), about one ulp away from the CPU's fused kernel, and minGPT's adder
drifted from its CPU twin after 200 iterations; `silu_backward` and `mish_backward` ran their math
versions, which round otherwise. Such operators must reach the CPU kernel (the fallback) on the device too.
"""

from __future__ import annotations

import json

import pytest

from emulated_run import REAL_CUDA, run_python

pytestmark = pytest.mark.skipif(REAL_CUDA, reason="the device's promise (CPU kernels), not CUDA's")

# Operators whose CUDA slot a CPU build fills with a composite kernel (CompositeExplicitAutograd or
# CompositeImplicitAutograd) although the CPU has a kernel of its own (views excluded: they alias, the
# device registers its own).
COMPOSITE_SLOTS = r"""
import json, torch
torch.ones(1, device="cuda")  # the device's registrations are in place
has = torch._C._dispatch_has_kernel_for_dispatch_key
missed = []
for name in torch._C._dispatch_get_all_op_names():
    if not name.startswith("aten::"):
        continue
    composite = has(name, "CompositeExplicitAutograd") or has(name, "CompositeImplicitAutograd")
    if has(name, "CPU") and composite and not has(name, "CUDA"):
        schema = torch._C._get_schema(*(name.split(".", 1) + [""])[:2])
        if not any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            missed.append(name)
print(json.dumps(missed))
"""

# Operators with a CPU kernel beside a CompositeImplicitAutograd one that serves the other backends
# (silu_backward's math_silu_backward rounds otherwise than the CPU's fused kernel).
IMPLICIT_SLOTS = r"""
import json, torch
torch.ones(1, device="cuda")
has = torch._C._dispatch_has_kernel_for_dispatch_key
print(json.dumps([name for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::")
                  and has(name, "CPU") and has(name, "CompositeImplicitAutograd") and not has(name, "CUDA")]))
"""

# mm with out_dtype= exists only on CUDA (linear_cross_entropy's chunked path calls it on cuda): the
# float16/bfloat16 factors widened exactly, multiplied in float32 as the CPU multiplies float32.
MM_DTYPE = r"""
import json, torch
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}
for dt in (torch.bfloat16, torch.float16):
    a, b = torch.randn(9, 33).to(dt), torch.randn(33, 5).to(dt)
    want = torch.mm(a.float(), b.float())
    got = torch.mm(a.cuda(), b.cuda(), out_dtype=torch.float32)
    out[f"{dt} mm.dtype"] = [str(got.dtype), got.device.type, torch.equal(got.cpu(), want)]
    o = torch.empty(0, device="cuda")
    torch.mm(a.cuda(), b.cuda(), out_dtype=torch.float32, out=o)
    out[f"{dt} mm.dtype_out"] = [list(o.shape), torch.equal(o.cpu(), want)]
try:
    torch.mm(torch.ones(2, 2, device="cuda"), torch.ones(2, 2, device="cuda"), out_dtype=torch.float16)
    out["float32 into float16"] = "accepted"
except RuntimeError as e:
    out["float32 into float16"] = "out_dtype must be the same as input dtype" in str(e)
print(json.dumps(out))
"""

SAME_BITS = r"""
import json, torch, torch.nn.functional as F
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}

def diff(a, b):
    return max((x - y.cpu()).abs().max().item() for x, y in zip(a, b))

def grads(fn, *ts):
    on = [[t.clone().requires_grad_() for t in ts], [t.cuda().requires_grad_() for t in ts]]
    res = [fn(*args) for args in on]
    g = torch.randn_like(res[0])
    res[0].backward(g)
    res[1].backward(g.cuda())
    return res, [[t.grad for t in args] for args in on]

x, w, b = torch.randn(16, 48), torch.randn(48), torch.randn(48)
(yc, yd), (gc, gd) = grads(lambda x, w, b: F.layer_norm(x, (48,), w, b), x, w, b)
out["layer_norm"] = diff([yc], [yd])
out["layer_norm grads"] = diff(gc, gd)
out["native_layer_norm mean/rstd"] = diff(torch.native_layer_norm(x, (48,), w, b, 1e-5)[1:],
                                          torch.native_layer_norm(x.cuda(), (48,), w.cuda(), b.cuda(), 1e-5)[1:])
x, w, b = torch.randn(4, 6, 10), torch.randn(6), torch.randn(6)
(yc, yd), (gc, gd) = grads(lambda x, w, b: F.group_norm(x, 3, w, b), x, w, b)
out["group_norm"] = diff([yc], [yd])
out["group_norm grads"] = diff(gc, gd)
m, u, v = torch.randn(5, 7), torch.randn(5), torch.randn(7)
out["addr"] = diff([torch.addr(m, u, v, beta=0.3, alpha=1.7)],
                   [torch.addr(m.cuda(), u.cuda(), v.cuda(), beta=0.3, alpha=1.7)])
for name, fn in (("silu", F.silu), ("mish", F.mish)):  # their backward ops: CPU kernel and a math composite
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        x = torch.randn(257, dtype=dtype)
        (yc, yd), (gc, gd) = grads(fn, x)
        out[f"{name} {dtype} grad"] = diff(gc, gd)
print(json.dumps(out))
"""



def _last_json(code: str) -> object:
    proc = run_python(["-c", code], {"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_cpu_kernel_is_shadowed_by_a_composite_on_the_device() -> None:
    assert _last_json(COMPOSITE_SLOTS) == []


def test_no_cpu_kernel_is_shadowed_by_an_implicit_composite_on_the_device() -> None:
    assert _last_json(IMPLICIT_SLOTS) == []


def test_mm_out_dtype_is_the_widened_cpu_product() -> None:
    got = _last_json(MM_DTYPE)
    for dt in ("torch.bfloat16", "torch.float16"):
        assert got[f"{dt} mm.dtype"] == ["torch.float32", "cuda", True]
        assert got[f"{dt} mm.dtype_out"] == [[9, 5], True]
    assert got["float32 into float16"] is True


# linalg_lstsq's functional form resizes empty out= tensors, and LAPACK leaves the solution column-major
# in a buffer of max(m, n) rows (3 x 3 with strides [1, 4] for a 4 x 3 system): the device's storage
# must be as large as the kernel's. gelsd/gelss: drivers whose CPU result does not depend on where
# the buffers lie (gelsy's does).
LSTSQ = r"""
import json, torch
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}
for dt in (torch.float64, torch.complex128):
    A, B = torch.randn(4, 3, dtype=dt), torch.randn(4, 3, dtype=dt)
    for drv in ("gelsd", "gelss"):
        want = torch.linalg.lstsq(A, B, driver=drv)
        got = torch.linalg.lstsq(A.cuda(), B.cuda(), driver=drv)
        out[f"{dt} {drv}"] = [list(got.solution.stride()) == list(want.solution.stride()),
                              torch.equal(got.solution.cpu(), want.solution)]
print(json.dumps(out))
"""


def test_lstsq_solution_in_a_padded_buffer() -> None:
    got = _last_json(LSTSQ)
    assert got == {k: [True, True] for k in got} and len(got) == 4, got


def test_norms_and_addr_are_bit_identical_to_the_cpu() -> None:
    diffs = _last_json(SAME_BITS)
    assert diffs == {k: 0.0 for k in diffs}, diffs

# Attention and repeat_interleave are composites (CompositeImplicitAutograd) that a serve loop calls
# thousands of times; where nothing needs their parts they run whole on the CPU, one fallback call:
# the only device allocation is the result. A gradient, a dispatch mode or dropout (the device's
# generator) keep the composite, as on a GPU.
# what both scripts below start with: one intra-op thread, a seed, and the device's allocation count
_COUNTING = r"""
import json, torch
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}

def allocations():
    return torch.cuda.memory_stats()["allocation.all.allocated"]
"""

HOST_COMPOSITES = _COUNTING + r"""
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

q, k, v = torch.randn(4, 1, 64), torch.randn(4, 300, 64), torch.randn(4, 300, 64)  # 3-D: the math path
mask = torch.rand(1, 300) > 0.3
kk = torch.randn(300, 2, 64)
dq, dk, dv, dmask, dkk = (t.cuda() for t in (q, k, v, mask, kk))
for name, ctx in (("inference", torch.inference_mode), ("no_grad", torch.no_grad)):
    with ctx():
        n = allocations()
        got = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=dmask, scale=0.125)
        out[name + " sdpa allocations"] = allocations() - n
        out[name + " sdpa same bits"] = torch.equal(got.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.125))
        got = dkk.repeat_interleave(2, dim=1)
        out[name + " repeat_interleave same bits"] = torch.equal(got.cpu(), kk.repeat_interleave(2, dim=1))

# a gradient: the composite, recorded by autograd (gradients equal the CPU's)
qc, qd = q.clone().requires_grad_(), dq.clone().requires_grad_()
F.scaled_dot_product_attention(qc, k, v, attn_mask=mask, scale=0.125).sum().backward()
F.scaled_dot_product_attention(qd, dk, dv, attn_mask=dmask, scale=0.125).sum().backward()
out["grad"] = qd.grad is not None and torch.allclose(qd.grad.cpu(), qc.grad, atol=1e-6)

# dropout draws from the device's generator: seeded by torch.cuda.manual_seed, the CPU's untouched
cpu_state = torch.get_rng_state()
draws = []
for _ in range(2):
    torch.cuda.manual_seed(3)
    with torch.inference_mode():
        draws.append(F.scaled_dot_product_attention(dq, dk, dv, dropout_p=0.5).cpu())
out["dropout seeded by the device"] = torch.equal(draws[0], draws[1])
out["dropout leaves the CPU generator"] = torch.equal(torch.get_rng_state(), cpu_state)

# a dispatch mode sees the same operators as on CPU tensors
class Seen(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))

seen = {}
for dev, args in (("cpu", (q, k, v)), ("cuda", (dq, dk, dv))):
    with torch.no_grad(), Seen() as mode:
        F.scaled_dot_product_attention(*args, scale=0.125)
    seen[dev] = [op for op in mode.ops if op not in ("aten._to_copy", "aten.copy_")]
out["mode sees the parts"] = seen["cuda"] == seen["cpu"] and len(seen["cpu"]) > 1
print(json.dumps(out))
"""


def test_hot_composites_run_whole_on_the_cpu_unless_their_parts_are_wanted() -> None:
    got = _last_json(HOST_COMPOSITES)
    want = {f"{mode} {what}": (1 if what.endswith("allocations") else True)
            for mode in ("inference", "no_grad") for what in ("sdpa allocations", "sdpa same bits", "repeat_interleave same bits")}
    want.update({"grad": True, "dropout seeded by the device": True, "dropout leaves the CPU generator": True,
                 "mode sees the parts": True})
    assert got == want

# Replacement kernels written with torch operators (flash-attn's, the KV store) read the device's tensors
# over their host memory (platform.cpu_views): the CPU's bits, the device allocating only results; a
# gradient or dropout keeps the device's operators.
HOST_ATTENTION = _COUNTING + r"""
from flash_attn import flash_attn_varlen_func

cu = torch.tensor([0, 5, 12], dtype=torch.int32)
q, k, v = torch.randn(12, 4, 32), torch.randn(12, 2, 32), torch.randn(12, 2, 32)
want = flash_attn_varlen_func(q, k, v, cu, cu, 7, 7, causal=True)
dq, dk, dv, dcu = (t.cuda() for t in (q, k, v, cu))
with torch.inference_mode():
    n = allocations()
    got = flash_attn_varlen_func(dq, dk, dv, dcu, dcu, 7, 7, causal=True)
    out["allocations"] = allocations() - n
out["device"] = str(got.device)
out["same bits"] = torch.equal(got.cpu(), want)
qg = dq.clone().requires_grad_()
flash_attn_varlen_func(qg, dk, dv, dcu, dcu, 7, 7, causal=True).sum().backward()
out["grad"] = qg.grad is not None and qg.grad.device.type == "cuda"
cpu = torch.get_rng_state()
draws = []
for _ in range(2):
    torch.cuda.manual_seed(5)
    draws.append(flash_attn_varlen_func(dq, dk, dv, dcu, dcu, 7, 7, dropout_p=0.5).cpu())
out["dropout seeded by the device"] = torch.equal(*draws)
out["dropout leaves the CPU generator"] = torch.equal(torch.get_rng_state(), cpu)

# the KV store writes the device's cache in place, over its host memory: no device allocation
from cudashim.kernels import ops
store = ops.store_kv_cache_tl(2 * 32, 4, dtype="float32")
cache, slots = torch.zeros(5, 4, 2, 32), torch.tensor([3, -1, 17, 8, 0, 9, 10, 11, 12, 13, 1, 2], dtype=torch.int32)
dcache, dslots = cache.cuda(), slots.cuda()
store(k, cache, slots)
with torch.inference_mode():
    n = allocations()
    store(dk, dcache, dslots)
    out["store allocations"] = allocations() - n
out["store same bits"] = torch.equal(dcache.cpu(), cache)
print(json.dumps(out))
"""


def test_replacement_kernels_read_device_tensors_on_the_host() -> None:
    assert _last_json(HOST_ATTENTION) == {"allocations": 1, "device": "cuda:0", "same bits": True, "grad": True,
                                          "dropout seeded by the device": True, "dropout leaves the CPU generator": True,
                                          "store allocations": 0, "store same bits": True}


# A compiled graph checks each convolution's output strides against what its fake tensors predict for
# the device (the memory format of the backend the device type selects); the CPU kernel's own layout
# differs where the input is channels-last (inductor lays a GPU convolution's input out so), and the
# compiled step failed its stride assertion. The device hands back the predicted layout, the CPU's bits.
CONV_LAYOUT = r"""
import json, torch, torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
torch.set_num_threads(1)
torch.manual_seed(0)
out = {}
cases = {
    "depthwise 2d, channels-last input": (torch.randn(2, 3, 10, 10).to(memory_format=torch.channels_last),
                                          torch.randn(3, 1, 3, 3), dict(groups=3)),
    "2d, channels-last input": (torch.randn(2, 4, 9, 9).to(memory_format=torch.channels_last), torch.randn(5, 4, 3, 3), {}),
    "transposed 2d, channels-last input": (torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last),
                                           torch.randn(4, 3, 3, 3), dict(stride=2)),
    "1d": (torch.randn(2, 4, 11), torch.randn(6, 4, 3), {}),
}
for name, (x, w, kw) in cases.items():
    fn = F.conv_transpose2d if name.startswith("transposed") else (F.conv1d if x.dim() == 3 else F.conv2d)
    xd, wd = x.cuda().requires_grad_(), w.cuda().requires_grad_()
    got = fn(xd, wd, **kw)
    with FakeTensorMode() as mode:
        predicted = fn(mode.from_tensor(xd), mode.from_tensor(wd), **kw).stride()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    cpu = fn(xc, wc, **kw)
    g = torch.randn_like(cpu)
    grads = torch.autograd.grad(got, (xd, wd), g.cuda()), torch.autograd.grad(cpu, (xc, wc), g)
    out[name] = {"strides as predicted": got.stride() == predicted,
                 "same bits": torch.equal(got.cpu(), cpu.detach()) and
                              all(torch.equal(a.cpu(), b) for a, b in zip(*grads))}
print(json.dumps(out))
"""


def test_convolution_layout_is_what_compiled_code_predicts_and_values_the_cpus() -> None:
    got = _last_json(CONV_LAYOUT)
    assert all(v["strides as predicted"] and v["same bits"] for v in got.values()), got


# A CPU kernel may hand part of its answer back as metadata of its out= argument: linalg_lu_solve with
# left=False solves the adjoint system and then flips the conj bit of its result in place. The device
# runs the kernel on a CPU view of the out= tensor, so the bit must reach the device tensor too (the
# simulated NPU reaches this through the operator's composite, torch_npu having no kernel for it).
OUT_CONJ = r"""
import json, torch
torch.manual_seed(0)
out = {}
for dtype in (torch.complex64, torch.complex128, torch.float64):
    A, B = torch.randn(3, 3, dtype=dtype), torch.randn(2, 3, dtype=dtype)
    LU, piv = torch.linalg.lu_factor(A)
    want = torch.linalg.lu_solve(LU, piv, B, left=False)
    got = torch.empty(2, 3, dtype=dtype, device="cuda")
    torch.linalg.lu_solve(LU.cuda(), piv.cuda(), B.cuda(), left=False, out=got)
    out[str(dtype)] = torch.equal(got.cpu(), want)
print(json.dumps(out))
"""


def test_an_out_argument_takes_the_conj_bit_its_cpu_kernel_sets() -> None:
    got = _last_json(OUT_CONJ)
    assert all(got.values()), got
