"""Device tensors across processes, as CUDA IPC shares them: `python _ipc_worker.py DEVICE METHOD`
(DEVICE cuda or cpu, METHOD spawn or forkserver) prints one JSON line. A queue round trip (a tensor
sent to a child, written there and seen written here, written here and seen there, a tensor made
by the child received here) and a hogwild-style training of one model shared by two processes;
test_ipc.py compares the cuda run with the cpu run of plain torch."""

from __future__ import annotations

import json
import sys

import torch
import torch.multiprocessing as mp


def echo(q_in, q_out) -> None:
    x = q_in.get()
    ok = x.device.type == DEVICE_TYPE(x) and x.tolist() == [0.0, 1.0, 2.0, 3.0]
    x.add_(10)  # seen by the sender
    if x.is_cuda:
        torch.cuda.synchronize()
    q_out.put((ok, x + 100))  # a tensor this process made, sent back
    assert q_in.get() == "check"
    q_out.put(x.tolist())  # the sender's later write, seen here


def DEVICE_TYPE(x) -> str:
    return x.device.type


def train(model, data, target, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        opt.step()


def main(device: str, method: str) -> dict:
    ctx = mp.get_context(method)
    q_in, q_out = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=echo, args=(q_in, q_out))
    child.start()
    x = torch.arange(4.0, device=device)
    q_in.put(x)
    ok, made = q_out.get(timeout=120)
    round_trip = {"child_saw": ok, "child_wrote": x.tolist(), "made": made.tolist(), "made_device": made.device.type}
    x.mul_(2)
    if x.is_cuda:
        torch.cuda.synchronize()  # the child reads it next: CUDA IPC orders nothing past the send
    q_in.put("check")
    round_trip["child_saw_later_write"] = q_out.get(timeout=120)
    child.join(timeout=120)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(device)
    model.share_memory()
    losses = []
    for rank in range(2):  # one after the other: the same updates in the same order as the cpu run
        data = torch.randn(32, 8).to(device)
        target = torch.randn(32, 1).to(device)
        p = ctx.Process(target=train, args=(model, data, target, 5))
        p.start()
        p.join(timeout=300)
        losses.append(p.exitcode)
        with torch.no_grad():
            losses.append(float(torch.nn.functional.mse_loss(model(data), target)))
    params = [t.detach().cpu().flatten().tolist() for t in model.parameters()]
    return {"round_trip": round_trip, "exitcodes_and_losses": losses, "params": params,
            "param_device": next(model.parameters()).device.type}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
