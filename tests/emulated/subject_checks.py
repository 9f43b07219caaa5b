"""CUDA behaviour that third-party subjects (benchmarks/third_party.py) found missing on the emulated
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
