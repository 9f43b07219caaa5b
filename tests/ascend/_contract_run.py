"""Runs in a fresh interpreter: stand-in torch_npu + real transfer_to_npu + the shim's ascend step.

Usage: python _contract_run.py SITE MODE REPO   (MODE: full | report). Prints one JSON line of observations;
tests/ascend/test_transfer_to_npu_contract.py asserts on them. Kept free of assertions so every
observation is reported even when one of them goes wrong.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

SITE, MODE, REPO = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:0] = [SITE, REPO]
obs: dict[str, object] = {}


def observe(name, fn):  # noqa: ANN001, ANN201
    try:
        obs[name] = fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is the observation
        obs[name] = {"error": type(exc).__name__, "message": str(exc)[:400]}


def trap(fn):  # noqa: ANN001, ANN201
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return {"error": type(exc).__name__, "message": str(exc)[:400]}
    return "no error"


from cudashim import envs  # noqa: E402

envs.apply_platform_env("ascend")  # what the bootstrap settles before torch (TILELANG_DEFAULT_TARGET among it)

import torch  # noqa: E402

import torch_npu  # noqa: E402  (the stand-in)

obs["real_cuda_available_before"] = torch.cuda.is_available()

import cudashim.installers  # noqa: E402

cudashim.installers.install("ascend")
upstream = sys.modules.get("torch_npu.contrib.transfer_to_npu")
obs["transfer_to_npu_file"] = getattr(upstream, "__file__", None)
obs["cuda_available_after"] = torch.cuda.is_available()
obs["torch_version_cuda"] = torch.version.cuda
obs["tilelang_default_target"] = os.environ.get("TILELANG_DEFAULT_TARGET")
rec = torch_npu.RECORD


def since(mark, name):  # noqa: ANN001, ANN201
    return [[list(map(repr, a)), {k: repr(v) for k, v in kw.items()}] for n, a, kw in rec[mark:] if n == name]


# streams: .cuda_stream is the NPU handle, on what torch.cuda hands out
s = torch.cuda.Stream()
obs["stream_is_npu_stream"] = type(s) is torch.npu.Stream or isinstance(s, torch.npu.Stream)
obs["cuda_stream_equals_npu_stream"] = s.cuda_stream == s.npu_stream
cur = torch.cuda.current_stream()
obs["current_stream_cuda_stream"] = [cur.cuda_stream, cur.npu_stream]

# CUDAGraph(keep_graph=True) reaches NPUGraph without keep_graph
mark = len(rec)
g = torch.cuda.CUDAGraph(keep_graph=True)
obs["graph_is_npugraph"] = isinstance(g, torch.npu.NPUGraph)
obs["npugraph_init_calls"] = since(mark, "_NPUGraph.__init__")
obs["graph_plain"] = isinstance(torch.cuda.CUDAGraph(), torch.npu.NPUGraph)
mark = len(rec)
obs["instantiate_returns"] = repr(g.instantiate())
obs["instantiate_native_calls"] = len(rec) - mark
obs["raw_cuda_graph"] = trap(g.raw_cuda_graph)

# torch.cuda.graph(cuda_graph=...) through the real torch_npu graph context manager
mark = len(rec)
with torch.cuda.graph(cuda_graph=g, capture_error_mode="relaxed"):
    pass
obs["graph_kw_capture_begin"] = since(mark, "_NPUGraph.capture_begin")
obs["graph_kw_capture_end"] = len(since(mark, "_NPUGraph.capture_end"))
mark = len(rec)
with torch.cuda.graph(g, None, None, "thread_local"):  # CUDA's positional order
    pass
obs["graph_pos_capture_begin"] = since(mark, "_NPUGraph.capture_begin")
obs["graph_pos_auto_dispatch"] = g.auto_dispatch_capture

# allocator settings through torch.cuda.memory
mark = len(rec)
torch.cuda.memory._set_allocator_settings("expandable_segments:True")
obs["alloc_forwarded"] = since(mark, "npu.memory._set_allocator_settings")
obs["alloc_startup_key"] = trap(lambda: torch.cuda.memory._set_allocator_settings("max_split_size_mb:128"))
obs["alloc_unknown_key"] = trap(lambda: torch.cuda.memory._set_allocator_settings("backend:cudaMallocAsync"))
mark = len(rec)
torch.cuda.memory.memory_allocated()
obs["memory_allocated_reaches_npu"] = len(since(mark, "npu.memory.memory_allocated"))

# symmetric memory refused where the engine asks for it
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

obs["symm_mem_empty"] = trap(lambda: symm_mem.empty(16, device="cuda"))

# init_process_group("nccl") reaches the hccl backend (a recorded Gloo group underneath)
mark = len(rec)
import socket  # noqa: E402

with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
torch.distributed.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
obs["pg_backend"] = torch.distributed.get_backend()
obs["hccl_created"] = len(since(mark, "ProcessGroupHCCL"))
torch.distributed.destroy_process_group()

if MODE == "full":
    # TileLang's target detection: imported after the shim, so the probe comes through the import hook.
    # The box pretends to have a CUDA toolkit (an NPU host with CUDA headers): the case the probe is for.
    try:
        import tilelang.backend.target as tl_target
        import tilelang.cuda.target as tl_cuda
    except Exception as exc:  # noqa: BLE001
        obs["tilelang"] = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
    else:
        tl_cuda.check_cuda_availability = lambda: True
        seen = []
        real_detect = tl_cuda._detect_cuda_target

        def spy():  # noqa: ANN202
            seen.append(torch.cuda.is_available())
            return real_detect()

        tl_target._TARGET_DETECTORS["cuda"] = type(tl_target._TARGET_DETECTORS["cuda"])("cuda", spy)

        def kind(t):  # noqa: ANN001, ANN202
            return str(t.kind.name) if hasattr(t, "kind") else str(t)

        probe = tl_target.auto_detect_target
        unprobed = getattr(probe, "__cudashim_probe__", None)
        tl = obs["tilelang"] = {"probed": unprobed is not None}
        tl["auto"] = kind(probe())
        tl["seen_inside_probe"] = list(seen)
        tl["cuda_available_after_probe"] = torch.cuda.is_available()
        if unprobed is not None:
            seen.clear()
            tl["unprobed"] = kind(unprobed())
            tl["seen_unprobed"] = list(seen)

    # uninstall: our fillers go, upstream's aliasing stays
    cudashim.installers.uninstall()
    obs["after_uninstall"] = {
        "cuda_stream": hasattr(torch.npu.Stream, "cuda_stream"),
        "cuda_graph_is_npugraph": torch.cuda.CUDAGraph is torch.npu.NPUGraph,
        "tilelang_default_target": os.environ.get("TILELANG_DEFAULT_TARGET"),
        "probe": "tilelang.backend.target" in sys.modules
        and hasattr(sys.modules["tilelang.backend.target"].auto_detect_target, "__cudashim_probe__"),
        "cuda_available": torch.cuda.is_available(),
    }

print("OBSERVATIONS " + json.dumps(obs, default=repr))
