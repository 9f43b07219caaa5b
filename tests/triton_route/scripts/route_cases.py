"""Triton kernels on the emulated device: each case prints its outcome; one JSON line at the end.

Run under `cudashim run --platform cpu` (the route) or with TRITON_INTERPRET=1 (stock Triton's
interpreter, for the cases that show what it gets wrong). Outcome per case: ["ok", detail] or
[exception type, message].
"""

from __future__ import annotations

import json
import os
import sys

import torch
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover
    from triton.language.extra.cuda import libdevice

out: dict[str, list] = {}
STOCK = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cuda"


def case(name: str, fn) -> None:
    try:
        out[name] = ["ok", fn()]
    except BaseException as e:  # noqa: BLE001
        out[name] = [type(e).__name__, str(e)[:800]]


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def jit_type():
    return type(add_kernel).__name__


def driver():
    d = triton.runtime.driver.active
    props = d.utils.get_device_properties(d.get_current_device())
    return {"device": str(d.get_active_torch_device()), "current": d.get_current_device(),
            "stream": d.get_current_stream(d.get_current_device()), "target": repr(d.get_current_target()),
            "sm": props["multiprocessor_count"], "warp": props["warpSize"],
            "torch_sm": torch.cuda.get_device_properties(0).multi_processor_count}


def vector_add():
    x, y = torch.rand(1000, device=DEV), torch.rand(1000, device=DEV)
    o = torch.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, y, o, 1000, BLOCK=256)
    return bool(torch.equal(o, x + y))


def in_place():
    """A launch reads and writes the device's memory where it is: no storage is copied."""
    big = torch.zeros(1 << 20, device=DEV)
    x, y = torch.ones(64, device=DEV), torch.full((64,), 2.0, device=DEV)
    view = big[1000:1064]
    copies = []
    storage_cpu = torch.UntypedStorage.cpu

    def counting_cpu(self, *a, **k):
        copies.append(self.nbytes())
        return storage_cpu(self, *a, **k)

    torch.UntypedStorage.cpu = counting_cpu
    try:
        add_kernel[(1,)](x, y, view, 64, BLOCK=64)
    finally:
        torch.UntypedStorage.cpu = storage_cpu
    return {"copied_bytes": sum(copies), "written": bool((big[1000:1064] == 3).all()),
            "untouched": float(big[:1000].abs().sum() + big[1064:].abs().sum())}


@triton.jit
def eps_kernel(x_ptr, out_ptr, eps, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + eps.to(tl.float32), mask=m)


def float_scalar():
    x = torch.rand(100, device=DEV)
    o = torch.empty_like(x)
    eps_kernel[(1,)](x, o, 0.25, 100, BLOCK=128)
    return bool(torch.equal(o, x + 0.25))


@triton.jit
def libdevice_kernel(x_ptr, o1, o2, o3, o4, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(o1 + offs, libdevice.rsqrt(x), mask=m)
    tl.store(o2 + offs, libdevice.tanh(x), mask=m)
    tl.store(o3 + offs, libdevice.erf(x), mask=m)
    tl.store(o4 + offs, tl.extra.cuda.libdevice.pow(x, 1.5), mask=m)  # through the language module


def libdevice_fns():
    x = torch.rand(100, device=DEV) + 0.1
    outs = [torch.empty_like(x) for _ in range(4)]
    libdevice_kernel[(1,)](x, *outs, 100, BLOCK=128)
    ref = [x.rsqrt(), x.tanh(), torch.erf(x), x.pow(1.5)]
    return [bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6)) for a, b in zip(outs, ref)]


@triton.jit
def bf16_add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def bf16_add():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g).to(torch.bfloat16).to(DEV)
    y = torch.randn(1000, generator=g).to(torch.bfloat16).to(DEV)
    o = torch.empty_like(x)
    bf16_add_kernel[(1,)](x, y, o, 1000, BLOCK=1024)
    return bool(torch.equal(o, x + y))


@triton.jit
def to_bf16_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.bfloat16), mask=m)


def bf16_round():
    """fp32 -> bf16 rounds to nearest even (torch's .to(bfloat16) does), not truncation."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4096, generator=g).to(DEV)
    o = torch.empty(4096, dtype=torch.bfloat16, device=DEV)
    to_bf16_kernel[(1,)](x, o, 4096, BLOCK=4096)
    return bool(torch.equal(o, x.to(torch.bfloat16)))


@triton.jit
def rms_bf16_kernel(x_ptr, w_ptr, o_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    var = tl.sum(x.to(tl.float32) * x.to(tl.float32), axis=0) / n
    r = libdevice.rsqrt(var + eps)
    tl.store(o_ptr + offs, (x * r.to(tl.bfloat16)) * w, mask=m)


def bf16_rmsnorm():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(512, generator=g).to(torch.bfloat16).to(DEV)
    w = torch.randn(512, generator=g).to(torch.bfloat16).to(DEV)
    o = torch.empty_like(x)
    rms_bf16_kernel[(1,)](x, w, o, 512, 1e-6, BLOCK=512)
    r = torch.rsqrt(x.float().pow(2).mean() + 1e-6).to(torch.bfloat16)
    ref = (x * r) * w
    return {"nan": bool(o.isnan().any()), "equal": bool(torch.equal(o, ref)),
            "max_err": float((o.float() - ref.float()).abs().max())}


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def _relu_twice(x):
    return tl.where(x > 0, _twice(x), 0.0)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                 reset_to_zero=["acc_ptr"])
@triton.jit
def tuned_kernel(x_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(acc_ptr + offs, _relu_twice(tl.load(x_ptr + offs, mask=m)), mask=m)


def autotune_nested():
    x = torch.randn(200, device=DEV)
    acc = torch.full((200,), 7.0, device=DEV)  # reset_to_zero applies: the 7s are gone
    tuned_kernel[lambda meta: (triton.cdiv(200, meta["BLOCK"]),)](x, acc, 200)
    return {"equal": bool(torch.equal(acc, torch.where(x > 0, x * 2, 0.0))),
            "chosen": tuned_kernel.best_config.kwargs}


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heur_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(o_ptr + offs, tl.load(x_ptr + offs) + 1)
    else:
        m = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


def heuristics():
    x = torch.randn(100, device=DEV)
    o = torch.empty_like(x)
    heur_kernel[(4,)](x, o, 100, BLOCK=32)
    return bool(torch.equal(o, x + 1))


def graph_replay():
    """Captured, then replayed after the inputs changed: the output is the new inputs' sum."""
    x, y = torch.ones(100, device=DEV), torch.ones(100, device=DEV)
    o = torch.zeros(100, device=DEV)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        add_kernel[(1,)](x, y, o, 100, BLOCK=128)
        o.zero_()
        with torch.cuda.graph(g, stream=s):
            add_kernel[(1,)](x, y, o, 100, BLOCK=128)
    x.fill_(5.0)
    g.replay()
    first = o.clone()
    y.fill_(-1.0)
    g.replay()
    torch.cuda.synchronize()
    return {"first": bool((first == 6.0).all()), "second": bool((o == 4.0).all())}


def compiled():
    def f(a, b):
        o = torch.empty_like(a)
        add_kernel[(1,)](a * 2, b, o, 100, BLOCK=128)
        return o.sin()

    x, y = torch.randn(100, device=DEV), torch.randn(100, device=DEV)
    r = torch.compile(f)(x, y)
    return bool(torch.allclose(r, (x * 2 + y).sin()))


@triton.jit
def loop_kernel(x_ptr, o_ptr, NT, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i_t in range(NT):
        i64 = i_t.to(tl.int64)  # compiled, a loop index is a tensor
        acc += tl.load(x_ptr + i64 * BLOCK + tl.arange(0, BLOCK))
    tl.store(o_ptr + tl.arange(0, BLOCK), acc)


def loop_index():
    x = torch.randn(5, 16, device=DEV)
    o = torch.empty(16, device=DEV)
    loop_kernel[(1,)](x, o, 5, BLOCK=16)
    return bool(torch.allclose(o, x.sum(0)))


def dynamo_first():
    """torch._dynamo imported before Triton (it imports Triton itself, half-way): a launch under
    torch.compile is still a graph break, never traced."""
    import subprocess

    code = ("import torch, torch._dynamo, triton, triton.language as tl\n"
            "@triton.jit\n"
            "def k(x_ptr, o_ptr, B: tl.constexpr):\n"
            "    o = tl.arange(0, B)\n"
            "    tl.store(o_ptr + o, tl.load(x_ptr + o) * 3)\n"
            "def f(x):\n"
            "    o = torch.empty_like(x)\n"
            "    k[(1,)](x + 1, o, B=8)\n"
            "    return o - 1\n"
            "x = torch.ones(8, device='cuda')\n"
            "print(torch.compile(f)(x).tolist())\n")
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), "dynamo_first.py")  # @triton.jit needs its source in a file
    with open(path, "w") as f:
        f.write(code)
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)
    return r.stdout.strip().splitlines()[-1] if r.returncode == 0 else "failed: " + r.stderr[-600:]


def cpu_tensor():
    x = torch.ones(10)
    add_kernel[(1,)](x, x, x, 10, BLOCK=16)


def warmup():
    add_kernel.warmup(torch.ones(10, device=DEV), torch.ones(10, device=DEV), torch.ones(10, device=DEV), 10,
                      BLOCK=16, grid=(1,))


def n_regs():
    x = torch.ones(10, device=DEV)
    k = add_kernel[(1,)](x, x, x, 10, BLOCK=16)
    return k.n_regs


@triton.jit
def asm_kernel(x_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(o_ptr + offs, y)


def inline_asm():
    x = torch.ones(16, device=DEV)
    asm_kernel[(1,)](x, torch.empty_like(x), BLOCK=16)


def seam():
    """The execution seam: an executor that declines leaves the launch to the interpreter and its
    reason is counted; one that takes it runs instead; the launch check sees every launch."""
    from cudashim import triton_route
    from cudashim.triton_route import launch

    saved = list(launch._executors)  # the seam itself is under test: only the executors added here
    launch._executors.clear()
    seen = []
    triton_route.add_launch_check(triton_route.installed(), lambda k, grid, bound: seen.append((k.fn.__name__, grid, sorted(bound))))
    triton_route.add_executor("decline", lambda k, bound, grid: "not this one")
    x, y = torch.ones(8, device=DEV), torch.ones(8, device=DEV)
    o = torch.zeros(8, device=DEV)
    add_kernel[(1,)](x, y, o, 8, BLOCK=8)
    declined = bool((o == 2).all())
    ran = []
    triton_route.add_executor("take", lambda k, bound, grid: ran.append(grid))
    o.zero_()
    add_kernel[(1,)](x, y, o, 8, BLOCK=8)
    taken = bool((o == 0).all()) and ran == [(1, 1, 1)]
    triton_route.remove_executor("take")
    triton_route.remove_executor("decline")
    launch._executors[:] = saved
    paths = [s["paths"] for s in launch.stats() if s["kernel"].endswith(":add_kernel")][0]
    return {"declined_ran_interpreter": declined, "taken": taken, "seen": [list(map(str, s)) for s in seen[:1]],
            "paths": paths}


CASES = {
    "jit_type": jit_type, "driver": driver, "vector_add": vector_add, "in_place": in_place,
    "float_scalar": float_scalar, "libdevice": libdevice_fns, "bf16_add": bf16_add, "bf16_round": bf16_round,
    "bf16_rmsnorm": bf16_rmsnorm, "autotune_nested": autotune_nested, "heuristics": heuristics,
    "graph_replay": graph_replay, "compiled": compiled, "loop_index": loop_index, "dynamo_first": dynamo_first, "cpu_tensor": cpu_tensor, "warmup": warmup,
    "n_regs": n_regs, "inline_asm": inline_asm, "seam": seam,
}

if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        case(name, CASES[name])
    print(json.dumps(out))
