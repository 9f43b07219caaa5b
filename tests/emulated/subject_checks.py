"""CUDA behaviour that third-party subjects (verification/third_party.py) found missing on the emulated
device, written as plain CUDA code: each check passes on a real GPU (run it there with no shim, as
test_subject_defects.py does when torch.cuda is really available) and failed on the device before
its fix.
"""

from __future__ import annotations

import io
from typing import Callable

import torch

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _same_layer_on_cpu_and_cuda(make: Callable[[], torch.nn.Module]) -> None:
    # float64: cuDNN has no double RNN, so CUDA itself takes the fused-cell path checked here
    torch.manual_seed(0)
    cpu = make().double()
    dev = make().double().cuda()
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    xc = x.clone().requires_grad_()
    xd = x.cuda().requires_grad_()
    yc, _ = cpu(xc)
    yd, _ = dev(xd)
    assert yd.is_cuda
    torch.testing.assert_close(yd.cpu(), yc, rtol=1e-10, atol=1e-12)
    (yc * yc).sum().backward()
    (yd * yd).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-10, atol=1e-12)
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, rtol=1e-10, atol=1e-12, msg=f"grad of {name}")


@check
def lstm_on_device() -> None:
    """pytorch/examples word_language_model --accel: nn.LSTM on cuda ran no kernel (_thnn_fused_lstm_cell)."""
    _same_layer_on_cpu_and_cuda(lambda: torch.nn.LSTM(4, 6, num_layers=2))


@check
def gru_on_device() -> None:
    _same_layer_on_cpu_and_cuda(lambda: torch.nn.GRU(4, 6, num_layers=2))


@check
def checkpoint_of_cuda_tensors_loads_on_cuda() -> None:
    """word_language_model's torch.save(model) then torch.load: storages move to cuda (UntypedStorage.to)."""
    model = torch.nn.Linear(3, 2).cuda()
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert all(v.device == torch.device("cuda", 0) for v in loaded.values())
    assert torch.equal(loaded["weight"].cpu(), model.weight.detach().cpu())
    moved = torch.arange(4.0).untyped_storage().cuda()
    assert moved.device.type == "cuda" and moved.nbytes() == 16


@check
def deepcopy_of_cuda_module() -> None:
    """gpytorch's fantasy updates deepcopy a model on cuda: storage.clone() made a storage on 'cuda'."""
    import copy

    model = torch.nn.Linear(3, 2).cuda()
    twin = copy.deepcopy(model)
    assert twin.weight.is_cuda and torch.equal(twin.weight.cpu(), model.weight.detach().cpu())
    with torch.no_grad():
        twin.weight.add_(1)
    assert not torch.equal(twin.weight.cpu(), model.weight.detach().cpu()), "the deep copy shares memory"


@check
def svd_and_eig_layouts_are_cuda_layouts() -> None:
    """roma's compiled procrustes backward: torch.compile traces with CUDA's layouts (row-major Vh and
    eigenvectors), so the device must hand them back in that layout."""
    a = torch.randn(10, 3, 3, dtype=torch.float64, device="cuda")
    _, _, vh = torch.linalg.svd(a)
    assert vh.is_contiguous(), vh.stride()
    _, vectors = torch.linalg.eig(torch.randn(4, 4, device="cuda"))
    assert vectors.is_contiguous(), vectors.stride()
    # the values are still the CPU's: U diag(S) Vh == A
    u, s, vh = torch.linalg.svd(a)
    torch.testing.assert_close(u @ torch.diag_embed(s) @ vh, a)


@check
def attention_keeps_its_mask() -> None:
    """scaled_dot_product_attention with an attn_mask on cuda: the CUDA branch of SDPA called the flash
    operator, which takes no mask, so the mask was dropped (nn.TransformerEncoderLayer with a mask)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 7, 8, dtype=torch.float64) for _ in range(3))
    mask = torch.triu(torch.full((7, 7), float("-inf"), dtype=torch.float64), diagonal=1)
    mask[:, 0] = 0.0
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    qd, kd, vd = (t.cuda().requires_grad_() for t in (q, k, v))
    got = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask.cuda())
    torch.testing.assert_close(got.detach().cpu(), want)
    got.sum().backward()
    qc = q.clone().requires_grad_()
    torch.nn.functional.scaled_dot_product_attention(qc, k, v, attn_mask=mask).sum().backward()
    torch.testing.assert_close(qd.grad.cpu(), qc.grad)


@check
def compiled_attention() -> None:
    """nanoGPT's torch.compile'd model: Dynamo asks SDPA's backend choice with FakeTensors on cuda."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 16, 8, device="cuda") for _ in range(3))

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) * 2

    got = torch.compile(f)(q, k, v)
    torch.testing.assert_close(got, f(q, k, v))


@check
def compiled_attention_trains() -> None:
    """nanoGPT's float32 training step, compiled: q/k/v are transposed views of one projection, and
    the flash operator's outputs must have the layout its meta function promises (CUDA's)."""
    torch.manual_seed(0)
    b, h, n, e = 2, 2, 16, 32
    x = torch.randn(b, n, 3 * h * e, device="cuda")

    def attn(x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.view(b, n, h, e).transpose(1, 2) for t in x.split(h * e, dim=2))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(b, n, h * e)

    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    got = torch.compile(attn)(xc)
    want = attn(xe)
    (got * want.detach()).sum().backward()
    (want * want.detach()).sum().backward()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(xc.grad, xe.grad, atol=1e-5, rtol=1e-4)


@check
def ddp_trains_past_its_first_step() -> None:
    # DDP samples its timing statistics from its second iteration on, through a timer registered for
    # its parameters' device type (pytorch/examples' ddp-tutorial-series/multigpu.py stopped there)
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).cuda()
        ddp = DDP(model, device_ids=[torch.cuda.current_device()])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        x = torch.ones(3, 4, device="cuda")
        b0 = model.bias.detach().cpu()
        for _ in range(3):
            opt.zero_grad()
            ddp(x).sum().backward()
            opt.step()
        # each step: d(sum(Wx+b))/db = 3 per output, so b moved by 3 * 0.1 three times
        assert model.bias.is_cuda
        torch.testing.assert_close(model.bias.detach().cpu(), b0 - 0.9)
    finally:
        dist.destroy_process_group()
