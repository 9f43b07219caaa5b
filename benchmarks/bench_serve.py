"""Serve-loop throughput under the shim vs without it, measured in the same run.

The emulated device, on this machine:
    python benchmarks/bench_serve.py
  Re-runs itself under `python -m cudashim run --platform cpu`. The
  "cuda"-written loop runs on the emulated device's cuda tensors and its "cpu"-written twin on CPU
  tensors, both in that one process (the device and the CPU coexist: nothing to install or
  uninstall between rounds), rounds interleaved. Goal: ratio >= 0.95.

On an NVIDIA GPU, shim on against shim off is benchmarks/bench_passthrough_gpu.py's measure (the one
benchmark of that question: fresh processes, alternating, pinned to one CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a checkout without `pip install -e .` (the GPU box) still finds cudashim
    sys.path.insert(0, str(ROOT))


def _ensure_flash_attn() -> None:
    # shim off and no flash_attn installed: bind what the shim's patch pack binds, so the bare side
    # runs the same attention code (a CPU-written program would call the same torch implementation)
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        from cudashim.replacements import flash_attn as portable

        mod = types.ModuleType("flash_attn")
        mod.flash_attn_varlen_func = portable.flash_attn_varlen_func  # type: ignore[attr-defined]
        sys.modules["flash_attn"] = mod


def _load_serve() -> types.ModuleType:
    _ensure_flash_attn()
    spec = importlib.util.spec_from_file_location("serve_example", ROOT / "examples" / "serve.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _tps(serve: types.ModuleType, model, prompts, new_tokens: int, device: str, cuda_apis: bool, cpu_time: bool = False):
    """tokens per second of wall time (or, with cpu_time, per second of this process's CPU time:
    on a shared machine that leaves out the time other processes held the cores)."""
    import torch

    clock = time.process_time if cpu_time else time.perf_counter
    t0 = clock()
    out, _ = serve.generate(model, prompts, new_tokens, device, cuda_apis=cuda_apis)
    if cuda_apis:
        torch.cuda.synchronize()
    return out.numel() / (clock() - t0), out


def _under_device() -> bool:
    import torch

    return torch.cuda.is_available() and torch.version.cuda is None  # cuda without a CUDA build: the device


def bench_device(args: argparse.Namespace) -> dict:
    """Both sides in this process, under the emulated device: cuda tensors vs CPU tensors."""
    import torch

    serve = _load_serve()
    cfg = serve.Config(max_len=args.prompt_len + args.new_tokens, hidden=args.hidden, layers=args.layers)
    prompts = torch.randint(0, cfg.vocab_size, (args.batch, args.prompt_len), generator=torch.Generator().manual_seed(0))
    dtype = getattr(torch, args.dtype)
    models = {"bare": serve.build_model(cfg, "cpu", dtype, compile_layer=False),
              "shim": serve.build_model(cfg, "cuda", dtype, compile_layer=False)}
    # build_model draws the weights where the model lives: the device's generator is not the CPU's (as
    # on a GPU), so the cuda model takes the CPU model's weights, and the tokens must then be identical
    models["shim"].load_state_dict(models["bare"].state_dict())
    if args.control:
        models["control"] = serve.build_model(cfg, "cpu", dtype, compile_layer=False)
    rows: dict[str, list[float]] = {k: [] for k in models}
    same = True
    for r in range(args.rounds + 1):  # round 0 warms every side up and is not counted
        sides = list(models) if r % 2 else list(reversed(models))
        got = {}
        for side in sides:
            cuda = side == "shim"
            got[side] = _tps(serve, models[side], prompts, args.new_tokens, "cuda" if cuda else "cpu", cuda_apis=cuda,
                             cpu_time=args.cpu_time)
        same = same and torch.equal(got["bare"][1], got["shim"][1].cpu())
        if r:
            for side in models:
                rows[side].append(got[side][0])
    return {"platform": "cpu-device", "bare_tps": rows["bare"], "shim_tps": rows["shim"],
            "control_tps": rows.get("control", []), "identical_tokens": same}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21, help="paired rounds, in one process")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dtype", default="float32", help="model dtype")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads for the cpu bench (1: on a shared box, OpenMP barriers waiting for a "
                         "descheduled thread would swamp the measurement); 0 keeps torch's default")
    ap.add_argument("--cpu-time", action="store_true",
                    help="cpu bench: tokens per CPU-second of this process instead of per wall second (steadier "
                         "on a machine shared with other jobs)")
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="cpu bench: skip the A/A control (a second bare model timed the same way), whose ratio "
                         "to the bare side shows the noise floor of this machine in this run")
    args = ap.parse_args(argv)
    if not _under_device():
        env = dict(os.environ)
        env.pop("CUDASHIM_DISABLE", None)
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", __file__, *(argv if argv is not None else sys.argv[1:])]
        return subprocess.run(cmd, cwd=ROOT, env=env).returncode
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    res = bench_device(args)
    goal = 0.95
    # each round's pair ran back to back: the median of the per-round ratios is the least noisy figure
    ratio_med = statistics.median(s / b for s, b in zip(res["shim_tps"], res["bare_tps"]))
    ratio_best = max(res["shim_tps"]) / max(res["bare_tps"])
    res.update(ratio_median=ratio_med, ratio_best=ratio_best, goal=goal)
    print(json.dumps(res))
    unit = "tokens per CPU-second" if args.cpu_time else "tokens/s"
    label = "written with 'cuda', on the emulated device"
    base = "written with 'cpu', CPU tensors, same process"
    print(f"serve loop, {label}: {statistics.median(res['shim_tps']):.1f} {unit} (median of {len(res['shim_tps'])}); "
          f"{base}: {statistics.median(res['bare_tps']):.1f} {unit}")
    print(f"throughput ratio shim/bare: median of per-round ratios {ratio_med:.3f}, best-of {ratio_best:.3f} "
          f"(goal >= {goal}: {'met' if ratio_med >= goal else 'NOT met'})"
          + ("" if res["identical_tokens"] is None else f"; identical tokens: {res['identical_tokens']}"))
    if res.get("control_tps"):
        noise = statistics.median(c / b for c, b in zip(res["control_tps"], res["bare_tps"]))
        print(f"noise floor (A/A: the same bare loop on a second model vs the bare side): {noise:.3f}; "
              f"ratio of medians shim/bare {statistics.median(res['shim_tps']) / statistics.median(res['bare_tps']):.3f}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _results

    spread = [round(s / b, 3) for s, b in zip(res["shim_tps"], res["bare_tps"])]
    _results.record(f"serve_{res['platform']}", {
        f"{label} / {base} ({unit}), median of per-round ratios": round(ratio_med, 3),
        "per-round ratios, lowest and highest": [min(spread), max(spread)],
        "identical tokens": res["identical_tokens"]}, goal=f"ratio >= {goal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
