"""The emulated device runs the CPU's own kernels, so a `cuda` result is bit-identical to the same
operator on CPU tensors (one intra-op thread). That is the device's promise, not CUDA's: these tests
skip under real CUDA.

A CPU build of PyTorch fills the CUDA slot of an operator that has both a CPU kernel and a
CompositeExplicitAutograd kernel with the composite (written for backends without a kernel of their
own): `native_layer_norm` then ran `math_native_layer_norm` on the device (var_mean and friends), about
one ulp away from the CPU's fused kernel, and minGPT's adder drifted from its CPU twin after 200
iterations. Such operators must reach the CPU kernel (the fallback) on the device too.
"""

from __future__ import annotations

import json

import pytest

from emulated_run import REAL_CUDA, run_python

pytestmark = pytest.mark.skipif(REAL_CUDA, reason="the device's promise (CPU kernels), not CUDA's")

# Operators whose CUDA slot a CPU build fills with a CompositeExplicitAutograd kernel although the
# CPU has a kernel of its own (views excluded: they alias, the device registers its own).
COMPOSITE_SLOTS = r"""
import json, torch
torch.ones(1, device="cuda")  # the device's registrations are in place
has = torch._C._dispatch_has_kernel_for_dispatch_key
missed = []
for name in torch._C._dispatch_get_all_op_names():
    if not name.startswith("aten::") or has(name, "CompositeImplicitAutograd"):
        continue
    if has(name, "CPU") and has(name, "CompositeExplicitAutograd") and not has(name, "CUDA"):
        schema = torch._C._get_schema(*(name.split(".", 1) + [""])[:2])
        if not any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            missed.append(name)
print(json.dumps(missed))
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
print(json.dumps(out))
"""



def _last_json(code: str) -> object:
    proc = run_python(["-c", code], {"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_cpu_kernel_is_shadowed_by_a_composite_on_the_device() -> None:
    assert _last_json(COMPOSITE_SLOTS) == []


def test_norms_and_addr_are_bit_identical_to_the_cpu() -> None:
    diffs = _last_json(SAME_BITS)
    assert diffs == {k: 0.0 for k in diffs}, diffs
