"""CUDA-written functions that engines put under torch.compile, each beside the same code written
for the CPU. The compile runner (_compile_runner.py) compiles every CUDA-written version with
fullgraph=True on the emulated device and compares it with its CPU-written twin run eagerly on
plain torch (the device off).

A case is (name, the CUDA-written fn, the CPU-written fn, the input maker). Where the code is the
same but for the device, one function takes the device string and is called with "cuda" and "cpu".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

__all__ = ["Case", "CASES", "rms_norm"]


@dataclass(frozen=True)
class Case:
    name: str
    cuda: Callable[..., Any]
    cpu: Callable[..., Any]
    inputs: Callable[[], tuple[Any, ...]]
    # the CUDA-written version gets its inputs on the device, as a CUDA program holds them (a case
    # that mixes its input with device tensors); else it gets host tensors and moves them itself
    device_inputs: bool = False


CASES: list[Case] = []


def _x() -> tuple[Any, ...]:
    return (torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7,)


def _half() -> tuple[Any, ...]:
    return ((torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7).to(torch.bfloat16),)


def same(name: str, inputs: Callable[[], tuple[Any, ...]] = _x,
         device_inputs: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register fn(*inputs, dev) as a case run with dev="cuda" (compiled, shimmed) and "cpu" (plain)."""
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        # one function object per side: Dynamo caches per code object and guards on closures
        CASES.append(Case(name, lambda *a: fn(*a, "cuda"), lambda *a: fn(*a, "cpu"), inputs, device_inputs))
        return fn
    return deco


def pair(name: str, cuda: Callable[..., Any], cpu: Callable[..., Any], inputs: Callable[[], tuple[Any, ...]] = _x,
         device_inputs: bool = False) -> None:
    CASES.append(Case(name, cuda, cpu, inputs, device_inputs))


# --- Tensor.to / .cuda -------------------------------------------------------------------------------------
@same("x.float().to(orig_dtype)  (nano-vllm RMSNorm)", _half)
def _to_dtype(x: Any, dev: str) -> Any:
    orig = x.dtype
    return (x.float() * 2).to(orig)


@same('x.to("cuda")')
def _to_str(x: Any, dev: str) -> Any:
    return x.to(dev) + 1


@same('x.to("cuda:0", non_blocking=True)')
def _to_index(x: Any, dev: str) -> Any:
    return x.to(dev + ":0" if dev == "cuda" else dev, non_blocking=True) * 3


@same('x.to(torch.device("cuda"))')
def _to_device(x: Any, dev: str) -> Any:
    return x.to(torch.device(dev)) - 1


@same('x.to(device="cuda", dtype=torch.float64)')
def _to_kwargs(x: Any, dev: str) -> Any:
    return x.to(device=dev, dtype=torch.float64)


@same('x.to("cuda", torch.float16)')
def _to_both(x: Any, dev: str) -> Any:
    return x.to(dev, torch.float16)


@same("torch.Tensor.to(x, 'cuda')  (unbound)")
def _to_unbound(x: Any, dev: str) -> Any:
    return torch.Tensor.to(x, dev) * 2


pair("x.cuda()", lambda x: x.cuda() * 2, lambda x: x * 2)
pair("x.cuda(non_blocking=True)", lambda x: (x + 1).cuda(non_blocking=True), lambda x: x + 1)
pair("x.cuda(0)", lambda x: x.cuda(0) - x, lambda x: x - x, device_inputs=True)
pair("x.is_cuda", lambda x: x * 2 if x.is_cuda else x - 1, lambda x: x * 2 if x.is_cpu else x - 1, device_inputs=True)
pair("x.get_device()", lambda x: x + x.get_device(), lambda x: x + 0, device_inputs=True)  # the device's index, 0


# --- factories ----------------------------------------------------------------------------------------------
@same('torch.zeros(n, device="cuda")', device_inputs=True)
def _zeros(x: Any, dev: str) -> Any:
    return x + torch.zeros(x.shape[-1], device=dev)


@same('torch.ones(..., device=torch.device("cuda"), dtype=)', device_inputs=True)
def _ones(x: Any, dev: str) -> Any:
    return torch.ones(x.shape, device=torch.device(dev), dtype=torch.float64) * x


@same('torch.full(..., device="cuda")', device_inputs=True)
def _full(x: Any, dev: str) -> Any:
    return x * torch.full((x.shape[-1],), 2.5, device=dev)


@same('torch.arange(n, device="cuda")', device_inputs=True)
def _arange(x: Any, dev: str) -> Any:
    return x + torch.arange(x.shape[-1], device=dev)


@same('torch.empty(n, device="cuda:0").fill_()', device_inputs=True)
def _empty(x: Any, dev: str) -> Any:
    return torch.empty(x.shape[-1], device=dev + ":0" if dev == "cuda" else dev).fill_(3) * x


@same('torch.empty_like(x, device="cuda")', device_inputs=True)
def _empty_like(x: Any, dev: str) -> Any:
    return torch.empty_like(x, device=dev).fill_(1) + x


@same('torch.zeros_like(x, device="cuda", dtype=)')
def _zeros_like(x: Any, dev: str) -> Any:
    return torch.zeros_like(x, device=dev, dtype=torch.int64) + 7


@same('torch.tensor([...], device="cuda")', device_inputs=True)
def _tensor(x: Any, dev: str) -> Any:
    return x + torch.tensor([1.0, 2.0, 3.0, 4.0], device=dev)


@same('x.new_zeros(shape, device="cuda")', device_inputs=True)
def _new_zeros(x: Any, dev: str) -> Any:
    return x.new_zeros(x.shape, device=dev) + x


@same('x.new_full / new_ones / new_empty(device="cuda")', device_inputs=True)
def _new_misc(x: Any, dev: str) -> Any:
    return x.new_full((4,), 2.0, device=dev) + x.new_ones(4, device=torch.device(dev)) + x.new_empty(4).fill_(1)


# --- what engines compile -----------------------------------------------------------------------------------
def rms_norm(x: Any, w: Any, dev: str) -> Any:
    """nano-vllm's RMSNorm.rms_forward, with the weight moved where CUDA code keeps it."""
    orig_dtype = x.dtype
    x = x.float()
    var = x.pow(2).mean(dim=-1, keepdim=True)
    x.mul_(torch.rsqrt(var + 1e-6))
    return x.to(orig_dtype).mul_(w.to(dev))


def _norm_inputs() -> tuple[Any, ...]:
    # made on the CPU, whatever the default device: a CPU generator drawing for a cuda tensor raises on a
    # GPU ("Expected a 'cuda' device type for generator"), and so does the emulated device
    g = torch.Generator().manual_seed(0)
    return (torch.randn(5, 16, generator=g, device="cpu").to(torch.bfloat16),
            torch.randn(16, generator=g, device="cpu").to(torch.bfloat16))


same("RMSNorm (nano-vllm)", _norm_inputs, device_inputs=True)(rms_norm)


@same("rotary embedding cache built on cuda (nano-vllm)", lambda: (torch.arange(6),))
def _rotary(positions: Any, dev: str) -> Any:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 8, 2, dtype=torch.float, device=dev) / 8))
    t = torch.arange(16, dtype=torch.float, device=dev)
    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
    return cache[positions.to(dev)]


@same("greedy sampler with temperatures (nano-vllm)", lambda: (torch.arange(24, dtype=torch.float32).reshape(2, 12).sin(),),
      device_inputs=True)
def _sampler(logits: Any, dev: str) -> Any:
    temps = torch.tensor([0.5, 1.0], device=dev)
    probs = torch.softmax(logits.float().div_(temps.unsqueeze(1)), dim=-1)
    return probs.argmax(dim=-1).to(dev, non_blocking=True)


@same("autocast('cuda', bfloat16) matmul", _x, device_inputs=True)
def _autocast(x: Any, dev: str) -> Any:
    with torch.autocast(dev, dtype=torch.bfloat16):
        return x @ x.t()
