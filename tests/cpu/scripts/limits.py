"""Each CUDA feature the cpu platform does not emulate, used the way programs use it; prints {case: [error type, message]} as JSON."""

import json
import os
import tempfile

import torch

from cudashim.errors import CapabilityError

out = {}


def case(name, fn):
    try:
        fn()
        out[name] = [None, "no error"]
    except CapabilityError as exc:
        out[name] = ["CapabilityError", str(exc)]
    except Exception as exc:  # noqa: BLE001 - reported, the test says what was expected
        out[name] = [type(exc).__name__, str(exc)]


def graph_replay():
    # CUDA graphs are emulated on cpu (capture records, replay re-runs): no refusal
    x = torch.zeros(4, device="cuda")
    y = x + 1  # warm-up before capture, as CUDA asks
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x + 1
    x.fill_(2)
    g.replay()
    assert y.tolist() == [3.0] * 4, y


case("CUDAGraph capture + replay", graph_replay)

import torch.distributed as dist  # noqa: E402

# NCCL groups are Gloo groups (init_process_group("nccl") works); NCCL's own objects and C API do not exist
case("ProcessGroupNCCL(...)", lambda: dist.ProcessGroupNCCL(dist.HashStore(), 0, 1, dist.ProcessGroupNCCL.Options()))
case("torch.cuda.nccl.all_reduce", lambda: torch.cuda.nccl.all_reduce([torch.ones(2, device="cuda")]))


def nccl_only_method():
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        backend = dist.group.WORLD._get_backend(torch.device("cuda"))
        assert not hasattr(backend, "comm_split_count")  # a probe still says no
        backend.comm_split_count()
    finally:
        dist.destroy_process_group()


case("nccl group backend comm_split_count", nccl_only_method)

import torch.distributed._symmetric_memory as symm  # noqa: E402

case("symm_mem.empty", lambda: symm.empty(16, device="cuda"))
case("symm_mem.rendezvous", lambda: symm.rendezvous(torch.empty(4), "0"))

from torch.utils import cpp_extension  # noqa: E402

src = os.path.join(tempfile.mkdtemp(), "k.cu")
open(src, "w").write("__global__ void k() {}\n")
case("cpp_extension.load .cu", lambda: cpp_extension.load("k", [src]))
case("cpp_extension.load_inline cuda", lambda: cpp_extension.load_inline("k", "", cuda_sources="__global__ void k(){}"))
case("CUDAExtension", lambda: cpp_extension.CUDAExtension("k", [src]))
try:
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, n: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, n), tl.load(x_ptr + tl.arange(0, n)) + 1)

    # the launch runs (cudashim.triton_route); reading the compiled kernel it never had fails loudly
    case("triton compiled kernel", lambda: add_one[(1,)](torch.zeros(4, device="cuda"), 4).n_regs)
except ImportError:
    out["triton compiled kernel"] = ["skipped", "triton not installed"]
print(json.dumps(out))
