"""One rank of test_distributed.py's NCCL reductions: every ReduceOp on every dtype NCCL takes, on an
"nccl" group's cuda tensors, against NCCL's semantics written out here in plain Python (ProcessGroupNCCL's
getNcclReduceOp and NCCL's hostToDevRedOp): AVG of integers sums in the type and divides truncating
toward zero, AVG of floating types and PREMUL_SUM multiply each input by the factor before summing,
SUM of bools is an OR; BAND/BOR/BXOR, AVG of bools and PREMUL_SUM of integers raise; an all_reduce
captured in a CUDA graph (as tensor-parallel engines capture their decode step) reduces each replay's
new inputs, and its output stays where the capture put it. Runs with any world size: on one GPU with real NCCL (1 rank) it checks the same claims against CUDA itself."""

import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl")
R = dist.ReduceOp
BASE = [3, -5, 7, 1]
INTS = {torch.int8: 8, torch.uint8: 8, torch.int32: 32, torch.int64: 64}
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def wrap(v: int, dtype: torch.dtype) -> int:
    """v stored in an integer dtype (two's complement wrap-around)."""
    bits = INTS[dtype]
    v &= (1 << bits) - 1
    return v - (1 << bits) if dtype != torch.uint8 and v >= 1 << (bits - 1) else v


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // b
    return q if a >= 0 else -q


def local(dtype: torch.dtype, r: int = rank) -> torch.Tensor:
    return (torch.tensor(BASE) * (r + 1)).to(dtype).cuda()


def raises(kind: type, words: str, fn) -> None:
    try:
        fn()
    except kind as e:
        assert words in str(e), (words, str(e))
    else:
        raise AssertionError(f"no {kind.__name__} ({words})")


ranks_sum = world * (world + 1) // 2
for dtype in INTS:
    inputs = [[wrap(b * (r + 1), dtype) for b in BASE] for r in range(world)]
    total = [wrap(sum(col), dtype) for col in zip(*inputs)]
    x = local(dtype)
    dist.all_reduce(x, op=R.SUM)
    assert x.tolist() == total, (dtype, x)
    x = local(dtype)
    dist.all_reduce(x, op=R.AVG)
    assert x.tolist() == [trunc_div(t, world) for t in total], (dtype, x)
    for op in (R.BAND, R.BOR, R.BXOR):
        raises(ValueError, f"Cannot use ReduceOp.{op.name} with NCCL", lambda: dist.all_reduce(local(dtype), op=op))
    raises(TypeError, "PreMulSum Data type must be", lambda: dist.all_reduce(local(dtype), op=dist._make_nccl_premul_sum(2.0)))
# the sum wraps in the type before the division: int8 100 per rank
x = torch.full((2,), 100, dtype=torch.int8, device="cuda")
dist.all_reduce(x, op=R.AVG)
assert x.tolist() == [trunc_div(wrap(100 * world, torch.int8), world)] * 2, x

for dtype in FLOATS:
    expect = [b * ranks_sum / world for b in BASE]
    x = local(dtype)
    dist.all_reduce(x, op=R.AVG)
    assert x.tolist() == expect, (dtype, x)
    x = local(dtype)
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
    assert x.tolist() == [b * ranks_sum * 0.5 for b in BASE], (dtype, x)
    x = local(dtype)
    factor = torch.tensor(0.25, dtype=dtype, device="cuda")
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(factor))
    assert x.tolist() == [b * ranks_sum * 0.25 for b in BASE], (dtype, x)
# AVG multiplies before it sums: fp16 60000 per rank averages to 60000, not inf
x = torch.full((2,), 60000.0, dtype=torch.float16, device="cuda")
dist.all_reduce(x, op=R.AVG)
assert x.tolist() == [60000.0] * 2, x

flags = [[True, False, False, True], [True, True, False, False]]
x = torch.tensor(flags[rank % 2], device="cuda")
dist.all_reduce(x, op=R.SUM)
assert x.tolist() == [any(flags[r % 2][i] for r in range(world)) for i in range(4)], x
raises(TypeError, "Cannot use ReduceOp.AVG with boolean inputs",
       lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool, device="cuda"), op=R.AVG))

# the other reductions take the same semantics: reduce (root only), reduce_scatter_tensor, functional
x = local(torch.int64)
dist.reduce(x, dst=0, op=R.AVG)
int_avg = [trunc_div(b * ranks_sum, world) for b in BASE]
assert x.tolist() == (int_avg if rank == 0 else [b * (rank + 1) for b in BASE]), x
big = torch.arange(world * 2, dtype=torch.int64, device="cuda") * (rank + 1) - 1
out = torch.empty(2, dtype=torch.int64, device="cuda")
dist.reduce_scatter_tensor(out, big, op=R.AVG)
assert out.tolist() == [trunc_div(sum(i * (r + 1) - 1 for r in range(world)), world)
                        for i in range(rank * 2, rank * 2 + 2)], out
assert big.tolist() == [i * (rank + 1) - 1 for i in range(world * 2)], "reduce_scatter_tensor changed its input"
y = funcol.all_reduce(local(torch.int64), "avg", dist.group.WORLD)
assert y.tolist() == int_avg, y

# a collective inside a CUDA graph: the capture records it, every replay reduces what the inputs hold then
static = torch.zeros(4, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):  # warm-up outside the capture, on a side stream, as CUDA graphs want
    for _ in range(2):
        warm = static * 2
        dist.all_reduce(warm)
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    reduced = static * 2
    dist.all_reduce(reduced)
for step in (1.0, 3.0):
    static.copy_(torch.tensor(BASE, dtype=torch.float32, device="cuda") * (rank + 1) * step)
    graph.replay()
    assert reduced.tolist() == [2 * b * ranks_sum * step for b in BASE], (step, reduced)
dist.barrier()
print(f"rank {rank} ok", flush=True)
dist.destroy_process_group()
