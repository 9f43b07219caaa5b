"""install() / uninstall() of the cpu platform (the emulated device): what changes, and that every original comes back exactly."""

import json
import sys

import torch
import torch.distributed.device_mesh  # noqa: F401 - bound when loaded: loaded before install here
import torch.nn.parallel
import torch.utils._device

from cudashim.installers import cpu

OWNERS = {
    "torch": torch, "torch.cuda": torch.cuda, "torch.cuda.memory": torch.cuda.memory,
    "torch.cuda.random": torch.cuda.random, "torch.cuda.streams": torch.cuda.streams, "torch.cuda.graphs": torch.cuda.graphs, "torch.cuda.nvtx": torch.cuda.nvtx,
    "Tensor": torch.Tensor, "Module": torch.nn.Module, "DataParallel": torch.nn.DataParallel,
    "UntypedStorage": torch.UntypedStorage, "TypedStorage": torch.TypedStorage, "serialization": torch.serialization,
    "DeviceContext": torch.utils._device.DeviceContext, "autocast": torch.amp.autocast_mode.autocast,
    "cuda.amp.autocast": torch.cuda.amp.autocast, "GradScaler": torch.amp.grad_scaler.GradScaler,
    "dist": torch.distributed, "c10d": torch.distributed.distributed_c10d, "torch.cuda.nccl": torch.cuda.nccl,
    "dist.constants": torch.distributed.constants,
    "DDP": torch.nn.parallel.DistributedDataParallel, "torch.fft": torch.fft,
    "device_mesh": torch.distributed.device_mesh, "torch.accelerator": torch.accelerator,
}


def snap():
    return {k: dict(vars(o)) for k, o in OWNERS.items()}


def diff(a, b):
    out = []
    for k in a:
        for name in set(a[k]) | set(b[k]):
            if a[k].get(name, "<absent>") is not b[k].get(name, "<absent>"):
                out.append(f"{k}.{name}")
    return sorted(out)


before = snap()
cpu.install()
first = snap()
cpu.install()  # idempotent: nothing rebound
second = snap()
changed = diff(before, first)
wrapped = any(hasattr(getattr(torch.cuda, n), "__cudashim_report__") for n in ("synchronize", "device_count"))
report_calls = None
if "--report" in sys.argv:
    torch.cuda.synchronize()
    torch.cuda.current_device()
    from cudashim import report

    report_calls = {k: v["calls"] for k, v in report.entries().items()}
cpu.uninstall()
after = snap()
cpu.uninstall()  # idempotent
print(json.dumps({"changed": changed, "reinstall_changed": diff(first, second), "left_changed": diff(before, after),
                  "after_uninstall_cuda": torch.cuda.is_available(), "wrapped": wrapped, "report_calls": report_calls}))
