"""A DCGAN-style training loop (transposed convolutions, batch norm, a depthwise convolution, Adam),
run on CPU tensors and then on `cuda` in this process from the same seed; prints both runs' figures
(losses per step, a checksum of the generator's weights) as JSON."""

from __future__ import annotations

import hashlib
import json

import torch
from torch import nn

torch.set_num_threads(1)
NZ, NGF, NDF, STEPS = 16, 8, 8, 6


def models() -> tuple[nn.Module, nn.Module]:
    gen = nn.Sequential(
        nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 4), nn.ReLU(True),
        nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
        nn.ConvTranspose2d(NGF * 2, 3, 4, 2, 1, bias=False), nn.Tanh())
    disc = nn.Sequential(
        nn.Conv2d(3, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF, NDF, 3, 1, 1, groups=NDF, bias=False),  # depthwise
        nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    return gen, disc


def state_digest(*holders: object) -> str:
    """SHA-256 over the bytes of every tensor of the models (weights, batch norm's running statistics)
    and the optimizers (Adam's moments), in a fixed order: equal only if every bit is."""
    h = hashlib.sha256()
    for holder in holders:
        state = holder.state_dict()  # type: ignore[attr-defined]
        tensors = state.values() if isinstance(holder, nn.Module) else \
            [t for s in state["state"].values() for _, t in sorted(s.items())]
        for t in tensors:
            if isinstance(t, torch.Tensor):
                h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def train(device: str) -> dict[str, list[float]]:
    torch.manual_seed(0)
    gen, disc = (m.to(device) for m in models())
    real = torch.rand(STEPS, 8, 3, 16, 16).mul(2).sub(1)  # drawn on the host: both runs see the same data
    noise = torch.randn(STEPS, 8, NZ, 1, 1)
    crit = nn.BCELoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    figures: dict[str, list[float]] = {"loss_d": [], "loss_g": [], "d_x": []}
    for step in range(STEPS):
        x, z = real[step].to(device), noise[step].to(device)
        ones, zeros = torch.ones(8, device=device), torch.zeros(8, device=device)
        disc.zero_grad()
        out = disc(x).view(-1)
        err_real = crit(out, ones)
        err_real.backward()
        fake = gen(z)
        err_fake = crit(disc(fake.detach()).view(-1), zeros)
        err_fake.backward()
        opt_d.step()
        gen.zero_grad()
        err_g = crit(disc(fake).view(-1), ones)
        err_g.backward()
        opt_g.step()
        figures["loss_d"].append((err_real + err_fake).item())
        figures["loss_g"].append(err_g.item())
        figures["d_x"].append(out.mean().item())
    figures["gen_weights"] = [float(sum(p.detach().double().sum().item() for p in gen.parameters()))]
    figures["state_sha256"] = [state_digest(gen, disc, opt_g, opt_d)]
    figures["devices"] = sorted({p.device.type for p in gen.parameters()})
    return figures


print(json.dumps({"cpu": train("cpu"), "cuda": train("cuda")}))
