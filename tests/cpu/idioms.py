"""CUDA idioms from real engines and training scripts, each beside the same code written for the CPU.

An idiom is (name, where it comes from, the CUDA-written code, the CPU-written code). Where the
code is the same but for the device, one function takes the device string and is called with
"cuda" (under the shim) and "cpu" (plain torch). torch.cuda-only APIs have a CPU-written
counterpart that computes the expected answer independently (e.g. reading /proc itself).
The runner (_idiom_runner.py) runs every CPU version on plain torch, then every CUDA version under
the cpu platform's emulated device, with the same seed, and compares the results exactly (or within `tol`).
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["Idiom", "IDIOMS"]


@dataclass(frozen=True)
class Idiom:
    name: str
    source: str
    cuda: Callable[[], Any]
    cpu: Callable[[], Any]
    tol: float | None = None


IDIOMS: list[Idiom] = []


def same(name: str, source: str, tol: float | None = None) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    """Register fn(dev) as an idiom run with "cuda" and with "cpu"."""
    def deco(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        IDIOMS.append(Idiom(name, source, lambda: fn("cuda"), lambda: fn("cpu"), tol))
        return fn
    return deco


def pair(name: str, source: str, cuda: Callable[[], Any], cpu: Callable[[], Any], tol: float | None = None) -> None:
    IDIOMS.append(Idiom(name, source, cuda, cpu, tol))


def _proc_kb(path: str, key: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _model(dev: str | torch.device | None = None) -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    return m if dev is None else m.to(dev)


def _x(*shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(*shape, generator=g)


# ---- tensor factories -------------------------------------------------------------------------
same("randn device str", "nano-vllm sampler warm-up")(lambda d: torch.randn(4, 4, device=d))
same("zeros torch.device", "vLLM input batch")(lambda d: torch.zeros(3, device=torch.device(d)))
same("ones cuda:0", "HF generate")(lambda d: torch.ones(2, 3, device=f"{d}:0" if d == "cuda" else d))
same("empty int device", "Megatron buffers")(lambda d: torch.empty(5, device=0 if d == "cuda" else d).fill_(1))
same("arange", "nano-vllm positions")(lambda d: torch.arange(10, device=d))
same("tensor long", "nano-vllm prepare_decode")(lambda d: torch.tensor([1, 2, 3], dtype=torch.long, device=d))
same("full", "attention mask init")(lambda d: torch.full((2, 2), 7.0, device=d))
same("eye", "init code")(lambda d: torch.eye(3, device=d))
same("linspace", "rope tables")(lambda d: torch.linspace(0, 1, 5, device=d))
same("randint", "data loaders / tests")(lambda d: torch.randint(0, 10, (5,), device=d))
same("randperm", "samplers")(lambda d: torch.randperm(8, device=d))
same("zeros_like device", "optimizer state")(lambda d: torch.zeros_like(_x(3), device=d))
same("full_like", "logits processors")(lambda d: torch.full_like(_x(3).to(d), 2.0))
same("randn_like", "diffusion noise")(lambda d: torch.randn_like(_x(3), device=d))
same("as_tensor numpy", "dataset collate")(lambda d: torch.as_tensor(_x(4).numpy(), device=d))
same("tril_indices", "causal masks")(lambda d: torch.tril_indices(3, 3, device=d))
same("scalar item", "loss logging")(lambda d: torch.tensor(3.5, device=d).item())
same("nn.Linear device kwarg", "HF from_config(device=)")(lambda d: nn.Linear(4, 4, device=d).weight.shape)
same("Generator device + multinomial", "vLLM sampler")(
    lambda d: torch.multinomial(torch.softmax(_x(8).to(d), -1), 3,
                                generator=torch.Generator(device=d).manual_seed(3)))
same("randn with Generator", "seeded sampling")(
    lambda d: torch.randn(4, device=d, generator=torch.Generator(device=d).manual_seed(5)))

# ---- moving tensors ---------------------------------------------------------------------------
same("Tensor.to str", "everywhere")(lambda d: _x(3).to(d))
same("Tensor.to non_blocking", "nano-vllm prepare_prefill")(lambda d: _x(3).to(d, non_blocking=True))
same("Tensor.to device+dtype", "mixed precision")(
    lambda d: _x(3).to(torch.device(d, 0) if d == "cuda" else torch.device(d), torch.float16))
same("Tensor.to device kw", "HF Trainer _prepare_input")(lambda d: _x(3).to(device=d, dtype=torch.float64))
pair("Tensor.cuda()", "classic training loops", lambda: _x(3).cuda(), lambda: _x(3))
pair("Tensor.cuda(0)", "multi-GPU scripts", lambda: _x(3).cuda(0), lambda: _x(3))
pair("pinned .cuda(non_blocking)", "nano-vllm / vLLM host buffers",
     lambda: torch.tensor([1, 2, 3], pin_memory=True).cuda(non_blocking=True), lambda: torch.tensor([1, 2, 3]))
pair("empty pin_memory=True", "vLLM pinned buffers", lambda: torch.empty(4, pin_memory=True).shape,
     lambda: torch.empty(4).shape)
pair(".pin_memory() then is_pinned", "DataLoader collate", lambda: _x(2).pin_memory().is_pinned(),
     lambda: True)  # CUDA's answer: page-locked host memory
pair("Tensor.is_cuda", "assert x.is_cuda", lambda: torch.zeros(1, device="cuda").is_cuda,
     lambda: torch.zeros(1).is_cpu)
same("new_zeros / new_full", "vLLM model code")(
    lambda d: (_x(2).to(d).new_zeros((2, 2)), _x(2).to(d).new_full((3,), 4.0, device=d)))
same("new_tensor", "HF utils")(lambda d: _x(2).to(d).new_tensor([1.0, 2.0], device=d))
same("Tensor.cpu().numpy()", "metrics")(lambda d: (_x(3).to(d) * 2).cpu().numpy().tolist())
pair("from_numpy().cuda()", "dataset pipelines", lambda: torch.from_numpy(_x(3).numpy()).cuda(),
     lambda: torch.from_numpy(_x(3).numpy()))

# ---- modules ----------------------------------------------------------------------------------
pair("Module.cuda() forward", "timm train.py", lambda: _model().cuda()(_x(2, 8).cuda()), lambda: _model()(_x(2, 8)))
same("Module.to(device)", "HF model.to(device)")(lambda d: _model(d)(_x(2, 8).to(d)))
same("Module.to(device=, dtype=)", "half-precision inference")(
    lambda d: _model().to(device=d, dtype=torch.float64)(_x(2, 8).to(d, torch.float64)))


def _to_empty(dev: str) -> Any:
    with torch.device("meta"):
        m = nn.Linear(4, 2)
    m = m.to_empty(device=dev)
    torch.manual_seed(0)
    m.reset_parameters()
    return m.weight.device.type == dev, m(_x(1, 4).to(dev))


same("meta init + to_empty", "torchtitan / FSDP2 init")(_to_empty)


def _with_device(dev: str) -> Any:
    torch.manual_seed(0)
    with torch.device(dev):
        m = nn.Linear(4, 2)
        t = torch.ones(2)
    return m(_x(1, 4).to(dev)), t  # an input made outside the block is a CPU tensor, on CUDA too


same("with torch.device()", "gpt-fast model build")(_with_device)


def _default_device(dev: str) -> Any:
    torch.set_default_device(dev)
    try:
        torch.manual_seed(0)
        return torch.randn(3), torch.get_default_device().type == dev
    finally:
        torch.set_default_device(None)


same("set_default_device", "HF accelerate big-model init")(_default_device)


def _buffers(dev: str) -> Any:
    class WithBuf(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.full((2,), 3.0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    m = WithBuf()
    m = m.cuda() if dev == "cuda" else m
    return m(torch.ones(2, device=dev))


same("register_buffer + .cuda()", "rotary embedding caches")(_buffers)


def _data_parallel(dev: str) -> Any:
    m = _model(dev)
    m = nn.DataParallel(m) if dev == "cuda" else m
    return m(_x(4, 8).to(dev))


# the batch is split across the devices: smaller matmuls round differently, on GPUs too
same("nn.DataParallel", "legacy multi-GPU scripts", tol=1e-6)(_data_parallel)

# ---- checkpoints --------------------------------------------------------------------------------


def _ckpt() -> io.BytesIO:
    buf = io.BytesIO()
    torch.save({"w": _x(3), "step": 7}, buf)
    buf.seek(0)
    return buf


def _gpu_ckpt() -> io.BytesIO:
    # a checkpoint whose storages are tagged "cuda:0", as one saved on a GPU is
    from torch.serialization import _package_registry, register_package

    register_package(-1000, lambda storage: "cuda:0", lambda storage, loc: None)
    try:
        return _ckpt()
    finally:
        del _package_registry[0]


same("torch.load map_location str", "resume from checkpoint")(lambda d: torch.load(_ckpt(), map_location=d))
same("torch.load map_location device", "HF load_state_dict")(
    lambda d: torch.load(_ckpt(), map_location=torch.device(d, 0) if d == "cuda" else torch.device(d)))
pair("torch.load map_location dict", "DDP rank remap", lambda: torch.load(_ckpt(), map_location={"cpu": "cuda:0"}),
     lambda: torch.load(_ckpt(), map_location={"cpu": "cpu"}))
pair("torch.load map_location callable", "fairseq checkpoint_utils",
     lambda: torch.load(_ckpt(), map_location=lambda s, loc: s.cuda(0)),
     lambda: torch.load(_ckpt(), map_location=lambda s, loc: s))
pair("torch.load GPU checkpoint, no map_location", "loading a checkpoint saved on a GPU",
     lambda: torch.load(_gpu_ckpt()), lambda: torch.load(_ckpt(), map_location="cpu"))
pair("torch.load GPU checkpoint, weights_only", "torch>=2.6 default loads",
     lambda: torch.load(_gpu_ckpt(), weights_only=True, map_location="cuda"),
     lambda: torch.load(_ckpt(), weights_only=True))

# ---- torch.cuda device management ----------------------------------------------------------------
_COUNT = int(os.environ.get("CUDASHIM_CPU_DEVICES") or os.environ.get("LOCAL_WORLD_SIZE") or 1)
pair("is_available", "every engine's first line", lambda: torch.cuda.is_available(), lambda: True)
pair("device_count", "torchrun scripts", lambda: torch.cuda.device_count(), lambda: _COUNT)


def _set_device() -> Any:
    torch.cuda.set_device(_COUNT - 1)
    try:
        return torch.cuda.current_device(), torch.zeros(1, device="cuda").get_device()
    finally:
        torch.cuda.set_device(0)


pair("set_device(local_rank) / current_device", "nano-vllm ModelRunner", _set_device, lambda: (_COUNT - 1, _COUNT - 1))


def _device_ctx() -> Any:
    with torch.cuda.device(_COUNT - 1):
        inside = torch.cuda.current_device()
    return inside, torch.cuda.current_device()


pair("with torch.cuda.device(i)", "multi-GPU utilities", _device_ctx, lambda: (_COUNT - 1, 0))
pair("synchronize", "benchmark loops", lambda: torch.cuda.synchronize(), lambda: None)
pair("get_device_name", "logging", lambda: torch.cuda.get_device_name(0),
     lambda: "CPU (" + next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")) + ")")
pair("get_device_capability", "flash-attn / bf16 gates", lambda: torch.cuda.get_device_capability(), lambda: (8, 0))
pair("get_device_properties", "vLLM / Megatron sizing",
     lambda: (torch.cuda.get_device_properties(0).total_memory, torch.cuda.get_device_properties(0).multi_processor_count),
     lambda: (_proc_kb("/proc/meminfo", "MemTotal"), os.cpu_count()))
pair("is_bf16_supported", "HF TrainingArguments", lambda: torch.cuda.is_bf16_supported(), lambda: True)
pair("nvtx ranges", "profiling annotations", lambda: (torch.cuda.nvtx.range_push("step"), torch.cuda.nvtx.range_pop()),
     lambda: (0, 0))
pair("legacy torch.cuda.FloatTensor", "old scripts", lambda: torch.cuda.FloatTensor([1.0, 2.0]),
     lambda: torch.FloatTensor([1.0, 2.0]))
pair("isinstance legacy type", "old scripts", lambda: isinstance(torch.zeros(2, device="cuda"), torch.cuda.FloatTensor),
     lambda: isinstance(torch.zeros(2), torch.FloatTensor))

# ---- RNG ---------------------------------------------------------------------------------------------


def _cuda_seed() -> Any:
    torch.cuda.manual_seed(123)
    return torch.randn(3, device="cuda")


def _cpu_seed() -> Any:
    torch.manual_seed(123)
    return torch.randn(3)


pair("cuda.manual_seed", "reproducibility helpers", _cuda_seed, _cpu_seed)


def _cuda_seed_all() -> Any:
    torch.manual_seed(7)
    torch.cuda.manual_seed_all(7)
    return torch.rand(2, device="cuda")


pair("manual_seed + manual_seed_all", "HF set_seed", _cuda_seed_all, lambda: (torch.manual_seed(7), torch.rand(2))[1])


def _rng_replay(get: Callable[[], Any], put: Callable[[Any], None], dev: str) -> Any:
    state = get()
    a = torch.randn(3, device=dev)
    put(state)
    return a, torch.randn(3, device=dev)


pair("get/set_rng_state replay", "activation checkpointing",
     lambda: _rng_replay(torch.cuda.get_rng_state, torch.cuda.set_rng_state, "cuda"),
     lambda: _rng_replay(torch.get_rng_state, torch.set_rng_state, "cpu"))
pair("get_rng_state_all", "DeepSpeed checkpoint", lambda: len(torch.cuda.get_rng_state_all()), lambda: _COUNT)


def _checkpoint(dev: str) -> Any:
    from torch.utils.checkpoint import checkpoint

    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 1)).to(dev)
    torch.manual_seed(3)
    x = _x(4, 8).to(dev).requires_grad_()
    out = checkpoint(m, x, use_reentrant=False, preserve_rng_state=True).sum()
    out.backward()
    return out.detach(), x.grad


same("activation checkpoint + dropout", "HF gradient_checkpointing")(_checkpoint)

# ---- streams, events, memory --------------------------------------------------------------------------


def _side_stream() -> Any:
    s = torch.cuda.Stream()
    x = _x(4).cuda()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2
        inside = torch.cuda.current_stream() == s
    torch.cuda.current_stream().wait_stream(s)
    y.record_stream(torch.cuda.current_stream())
    return y, inside, torch.cuda.current_stream() == torch.cuda.default_stream()


pair("side stream + wait_stream + record_stream", "vLLM async output copy", _side_stream, lambda: (_x(4) * 2, True, True))


def _events() -> Any:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) >= 15.0, end.query()


def _cpu_timing() -> Any:
    t0 = time.perf_counter()
    time.sleep(0.02)
    return (time.perf_counter() - t0) * 1000 >= 15.0, True


pair("Event elapsed_time", "benchmark timers", _events, _cpu_timing)


def _stream_event() -> Any:
    s = torch.cuda.Stream(priority=-1)
    ev = s.record_event()
    torch.cuda.current_stream().wait_event(ev)
    s.synchronize()
    return ev.query(), s.query()


pair("stream.record_event / wait_event", "SGLang overlap scheduler", _stream_event, lambda: (True, True))


def _mem_info() -> Any:
    free, total = torch.cuda.mem_get_info()
    return total, 0 < free <= total


pair("mem_get_info", "vLLM determine_num_available_blocks", _mem_info,
     lambda: (_proc_kb("/proc/meminfo", "MemTotal"), True))


def _mem_growth() -> Any:
    before = torch.cuda.memory_allocated()
    x = torch.ones(16 * 2**20, device="cuda")  # 64 MiB, touched
    grew = torch.cuda.memory_allocated() - before >= 48 * 2**20
    stats = torch.cuda.memory_stats()
    del x
    return grew, stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"] > 0


def _cpu_mem_growth() -> Any:
    before = _proc_kb("/proc/self/status", "VmRSS")
    x = torch.ones(16 * 2**20)
    grew = _proc_kb("/proc/self/status", "VmRSS") - before >= 48 * 2**20
    del x
    return grew, True


pair("memory_allocated / memory_stats", "nano-vllm allocate_kv_cache", _mem_growth, _cpu_mem_growth)


def _peak_reset() -> Any:
    x = torch.ones(1024, device="cuda")  # memory the device holds (CUDA counts tensors, not the process)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    out = torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated() > 0, torch.cuda.memory_reserved() > 0
    del x
    return out


pair("reset_peak_memory_stats / max_memory_allocated", "vLLM profile_run", _peak_reset, lambda: (True, True))
pair("set_per_process_memory_fraction / ipc_collect", "vLLM worker init",
     lambda: (torch.cuda.set_per_process_memory_fraction(0.5), torch.cuda.ipc_collect()), lambda: (None, None))

# ---- autocast, GradScaler, backends ---------------------------------------------------------------


def _mm_autocast(dev: str, **kw: Any) -> Any:
    a, b = _x(4, 4).to(dev), _x(4, 4).to(dev) + 1
    with torch.autocast(dev, **kw):
        c = a @ b
        enabled = torch.is_autocast_enabled(dev)
    return c, enabled


pair("autocast default dtype", "HF Trainer amp", lambda: _mm_autocast("cuda"),
     lambda: _mm_autocast("cpu", dtype=torch.float16))  # CUDA autocast's default is float16
same("autocast float16", "fp16 training")(lambda d: _mm_autocast(d, dtype=torch.float16))
same("autocast bfloat16", "bf16 training")(lambda d: _mm_autocast(d, dtype=torch.bfloat16))
same("autocast enabled=False", "numerically sensitive blocks")(lambda d: _mm_autocast(d, enabled=False))


def _cuda_amp_autocast() -> Any:
    with torch.cuda.amp.autocast():
        return _x(4, 4).cuda() @ _x(4, 4).cuda(), torch.is_autocast_enabled()


def _cpu_amp_autocast() -> Any:
    with torch.autocast("cpu", dtype=torch.float16):  # CUDA autocast's default dtype
        return _x(4, 4) @ _x(4, 4), torch.is_autocast_enabled("cpu")


pair("torch.cuda.amp.autocast()", "older AMP scripts", _cuda_amp_autocast, _cpu_amp_autocast)


@torch.autocast("cuda")
def _decorated(a: torch.Tensor) -> torch.Tensor:
    return a @ a


@torch.autocast("cpu", dtype=torch.float16)  # CUDA autocast's default dtype
def _decorated_cpu(a: torch.Tensor) -> torch.Tensor:
    return a @ a


pair("@torch.autocast decorator", "model forward decorators", lambda: _decorated(_x(3, 3).cuda()), lambda: _decorated_cpu(_x(3, 3)))


def _train_step(dev: str, scaler_factory: Callable[[], Any]) -> Any:
    m = _model(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = scaler_factory()
    for _ in range(2):
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = m(_x(4, 8).to(dev)).float().pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return [p.detach().clone() for p in m.parameters()], scaler.get_scale()


pair("torch.amp.GradScaler('cuda')", "mixed-precision training loop",
     lambda: _train_step("cuda", lambda: torch.amp.GradScaler("cuda")),
     lambda: _train_step("cpu", lambda: torch.amp.GradScaler("cpu")))
pair("torch.cuda.amp.GradScaler()", "older AMP scripts",
     lambda: _train_step("cuda", lambda: torch.cuda.amp.GradScaler()),
     lambda: _train_step("cpu", lambda: torch.amp.GradScaler("cpu")))


def _backends(dev: str) -> Any:
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.enable_flash_sdp(True)
        torch.backends.cuda.enable_mem_efficient_sdp(True)
    q = _x(1, 2, 4, 8).to(dev)
    return F.scaled_dot_product_attention(q, q, q, is_causal=True)


same("backends switches + SDPA", "HF attention setup")(_backends)

# ---- optimizers and training utilities ------------------------------------------------------------------


def _opt_step(dev: str, **kw: Any) -> Any:
    m = _model(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, **kw)
    for _ in range(2):
        loss = F.cross_entropy(m(_x(4, 8).to(dev)), torch.tensor([0, 1, 2, 3], device=dev))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    return [p.detach() for p in m.parameters()]


same("AdamW fused=True", "HF Trainer optim=adamw_torch_fused")(lambda d: _opt_step(d, fused=True))
same("AdamW foreach + clip_grad_norm_", "timm / torchtitan")(lambda d: _opt_step(d, foreach=True))


def _dataloader(pin: bool) -> Any:
    ds = torch.utils.data.TensorDataset(_x(8, 3), torch.arange(8))
    dl = torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=pin)
    return [(x.cuda(non_blocking=True) if pin else x, y) for x, y in dl]


pair("DataLoader pin_memory=True", "every training script", lambda: _dataloader(True), lambda: _dataloader(False))

# ---- distributed ---------------------------------------------------------------------------------------


def _pg(backend: str | None, fn: Callable[[], Any], **kw: Any) -> Any:
    import torch.distributed as dist

    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, **kw)
    try:
        return fn(), dist.get_backend()
    finally:
        dist.destroy_process_group()


def _named(backend: str, cpu: Callable[[], Any]) -> Callable[[], Any]:
    """The CPU twin of code on an NCCL group: run on Gloo, answering dist.get_backend() as the CUDA-written
    code's group does on a GPU (the name it was given), not "gloo"."""
    return lambda: (_pg("gloo", cpu)[0], backend)


def _allreduce(dev: str) -> Any:
    import torch.distributed as dist

    t = torch.arange(4.0, device=dev)
    dist.all_reduce(t)
    return t


pair("init_process_group('nccl') + all_reduce", "torchrun training", lambda: _pg("nccl", lambda: _allreduce("cuda")),
     _named("nccl", lambda: _allreduce("cpu")))
pair("backend 'cpu:gloo,cuda:nccl'", "torchtitan / FSDP2", lambda: _pg("cpu:gloo,cuda:nccl", lambda: _allreduce("cuda")),
     _named("cpu:gloo,cuda:nccl", lambda: _allreduce("cpu")))
pair("init_process_group(device_id=)", "torch>=2.3 eager init",
     lambda: _pg("nccl", lambda: _allreduce("cuda"), device_id=torch.device("cuda", 0)),
     _named("nccl", lambda: _allreduce("cpu")))
# no backend: the accelerator's default (NCCL for cuda); the group's name stays "undefined", as on a GPU
pair("init_process_group() without backend", "torch>=2.3 examples", lambda: _pg(None, lambda: _allreduce("cuda")),
     _named("undefined", lambda: _allreduce("cpu")))


def _new_group(backend: str, dev: str) -> Any:
    import torch.distributed as dist

    g = dist.new_group([0], backend=backend)
    t = torch.ones(2, device=dev)
    dist.all_reduce(t, group=g)
    dist.barrier(device_ids=[0]) if dev == "cuda" else dist.barrier()
    return t, dist.get_backend(g)


pair("new_group(backend='nccl') + barrier(device_ids)", "Megatron parallel_state",
     lambda: _pg("nccl", lambda: _new_group("nccl", "cuda")), _named("nccl", lambda: (_new_group("gloo", "cpu")[0], "nccl")))
pair("is_nccl_available", "launcher checks", lambda: __import__("torch.distributed").distributed.is_nccl_available(),
     lambda: True)


def _ddp(dev: str) -> Any:
    from torch.nn.parallel import DistributedDataParallel as DDP

    m = _model(dev)
    ddp = DDP(m, device_ids=[0], output_device=0) if dev == "cuda" else DDP(m)
    loss = ddp(_x(4, 8).to(dev)).sum()
    loss.backward()
    return [p.grad for p in m.parameters()]


pair("DDP(device_ids=[local_rank])", "PyTorch DDP tutorial", lambda: _pg("nccl", lambda: _ddp("cuda")),
     _named("nccl", lambda: _ddp("cpu")))

# ---- torch.compile -------------------------------------------------------------------------------------


def _compiled(dev: str) -> Any:
    def f(x: torch.Tensor) -> torch.Tensor:
        bias = torch.ones(x.shape[-1], device=dev)
        y = torch.nn.functional.gelu(x @ x.T) + bias
        return y * 2 if x.is_cuda or dev == "cpu" else y

    torch._dynamo.reset()
    return torch.compile(f)(_x(8, 8).to(dev))


same("torch.compile with device='cuda' inside", "gpt-fast / nano-vllm compiled sampler", tol=1e-5)(_compiled)


def _fsdp(dev: str, pass_device: bool) -> Any:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    m = _model(dev)
    if dev == "cuda":
        f = FSDP(m, device_id=torch.cuda.current_device()) if pass_device else FSDP(m)
    else:
        f = FSDP(m, device_id=torch.device("cpu"))
    loss = f(_x(4, 8).to(dev)).sum()
    loss.backward()
    return loss.detach()


pair("FSDP(device_id=current_device())", "FSDP tutorial / HF accelerate",
     lambda: _pg("nccl", lambda: _fsdp("cuda", True)), _named("nccl", lambda: _fsdp("cpu", True)))
pair("FSDP(model.cuda()) without device_id", "older FSDP scripts",
     lambda: _pg("nccl", lambda: _fsdp("cuda", False)), _named("nccl", lambda: _fsdp("cpu", False)))


def _mesh_fully_shard(dev: str) -> Any:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(dev, (1,))
    m = _model(dev)
    fully_shard(m, mesh=mesh)
    return mesh.device_type == dev, m(_x(2, 8).to(dev))


pair("init_device_mesh('cuda') + fully_shard", "torchtitan FSDP2", lambda: _pg("nccl", lambda: _mesh_fully_shard("cuda")),
     _named("nccl", lambda: _mesh_fully_shard("cpu")))


pair("Tensor.type('torch.cuda.HalfTensor')", "old fp16 scripts", lambda: _x(3).type("torch.cuda.HalfTensor"),
     lambda: _x(3).type("torch.HalfTensor"))
pair("Tensor.type() name", "old logging", lambda: _x(2).cuda().type(), lambda: "torch.cuda.FloatTensor")


def _mha(dev: str) -> Any:
    mha = nn.MultiheadAttention(16, 4, batch_first=True).to(dev).eval()
    x = _x(2, 5, 16).to(dev)
    with torch.no_grad():
        return mha(x, x, x, need_weights=False)[0]


same("nn.MultiheadAttention eval fast path", "torchvision ViT / HF encoders", tol=1e-6)(_mha)


def _encoder(dev: str) -> Any:
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).to(dev).eval()
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(dev)
    with torch.no_grad():
        return enc(_x(2, 5, 16).to(dev))


same("nn.TransformerEncoder eval", "PyTorch transformer tutorial", tol=1e-6)(_encoder)


class _Scaled(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
        return a * 2

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


class _ScaledCpu(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
        return a * 2

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


def _custom_fwd(fn: Any, dev: str) -> Any:
    with torch.autocast(dev, dtype=torch.bfloat16):
        out = fn.apply(_x(3).to(dev).to(torch.bfloat16))
    return out


pair("torch.amp.custom_fwd(device_type='cuda', cast_inputs=)", "apex-style fused ops",
     lambda: _custom_fwd(_Scaled, "cuda"), lambda: _custom_fwd(_ScaledCpu, "cpu"))
