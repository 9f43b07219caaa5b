"""L1 contract test: the shim's ascend step composed with the REAL transfer_to_npu.py of torch-npu 2.13.0.

What this proves: our gap fillers (cudashim/installers/ascend.py) install on top of the upstream file as it
ships — its torch.cuda → torch.npu rebinding, its device and backend rewriting, its apis_config probes —
and the two compose: torch.cuda.CUDAGraph(keep_graph=True) reaches torch_npu's NPUGraph (the real Python
class from the wheel) with no keep_graph; the real torch.npu.graph context manager receives CUDA-style
calls with their arguments in the right places; .cuda_stream is npu_stream on what torch.cuda hands out;
TileLang's target detection sees the real torch.cuda.is_available() (False) while the program sees True;
init_process_group("nccl") reaches an "hccl" process group; refused capabilities fail with
CapabilityError naming the API; uninstall takes our fillers off and leaves upstream's aliasing.

What it does NOT prove: anything about NPU behaviour. Every native part of torch_npu (streams, graphs,
memory, HCCL) is a recorded stand-in (tests/ascend/standin/), so kernels, capture, memory and
collectives on a real Ascend device are unverified (that is L3, and there is no NPU here).

It runs in a fresh interpreter (transfer_to_npu mutates torch globally and cannot be undone) with
CUDASHIM_DISABLE=1 so no bootstrap runs before the explicit ascend step. torch-npu is never installed:
the wheel is only read. The test skips only when the wheel cannot be downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().parent / "_contract_run.py"


def _run(site: Path, mode: str, **env: str) -> tuple[dict, subprocess.CompletedProcess]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDASHIM_", "TILELANG_"))}
    full_env.pop("PYTHONPATH", None)
    full_env.update({"CUDASHIM_DISABLE": "1", "PYTHONWARNINGS": "ignore", **env})
    proc = subprocess.run([sys.executable, str(RUNNER), str(site), mode, str(REPO)], env=full_env,
                          capture_output=True, text=True, timeout=300, cwd=str(site))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("OBSERVATIONS ")]
    assert proc.returncode == 0 and lines, f"runner failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("OBSERVATIONS "):]), proc


@pytest.fixture(scope="module")
def obs(standin_site: Path) -> dict:
    return _run(standin_site, "full")[0]


def test_the_upstream_file_is_the_real_one(obs: dict, standin_site: Path, npu_wheel: Path) -> None:
    loaded = Path(obs["transfer_to_npu_file"])
    assert loaded == standin_site / "torch_npu" / "contrib" / "transfer_to_npu.py"
    with zipfile.ZipFile(npu_wheel) as zf:
        shipped = zf.read("torch_npu/contrib/transfer_to_npu.py")
    assert hashlib.sha256(loaded.read_bytes()).digest() == hashlib.sha256(shipped).digest()


def test_upstream_aliasing_is_in_place(obs: dict) -> None:
    assert obs["real_cuda_available_before"] is False  # CPU torch, nothing shimmed yet
    assert obs["cuda_available_after"] is True  # torch.cuda.is_available is torch.npu's now
    assert obs["stream_is_npu_stream"] is True


def test_cuda_stream_is_npu_stream(obs: dict) -> None:
    assert obs["cuda_stream_equals_npu_stream"] is True
    handle, npu_handle = obs["current_stream_cuda_stream"]
    assert handle == npu_handle


def test_cuda_graph_keep_graph_reaches_npugraph_without_it(obs: dict) -> None:
    assert obs["graph_is_npugraph"] is True and obs["graph_plain"] is True
    # the native base was constructed exactly once, with no arguments (keep_graph would be a TypeError)
    assert obs["npugraph_init_calls"] == [[[], {}]]


def test_instantiate_is_a_no_op_and_raw_graph_is_refused(obs: dict) -> None:
    assert obs["instantiate_returns"] == "None"
    assert obs["instantiate_native_calls"] == 0
    err = obs["raw_cuda_graph"]
    assert err["error"] == "CapabilityError"
    assert "raw_cuda_graph" in err["message"] and "ascend" in err["message"]


def test_cuda_graph_signature_maps_onto_the_real_npu_graph(obs: dict) -> None:
    assert obs["graph_kw_capture_begin"] == [[[], {"pool": "None", "capture_error_mode": "'relaxed'",
                                                   "report_shape": "True"}]]
    assert obs["graph_kw_capture_end"] == 1
    # CUDA's 4th positional argument is capture_error_mode; NPU's is auto_dispatch_capture
    assert obs["graph_pos_capture_begin"][0][1]["capture_error_mode"] == "'thread_local'"
    assert obs["graph_pos_auto_dispatch"] is False


def test_allocator_settings_honoured_or_refused_by_name(obs: dict) -> None:
    assert obs["alloc_forwarded"] == [[["'expandable_segments:True'"], {}]]
    for key, name in (("alloc_startup_key", "max_split_size_mb"), ("alloc_unknown_key", "backend")):
        assert obs[key]["error"] == "CapabilityError"
        assert repr(name) in obs[key]["message"] and "ascend" in obs[key]["message"]
    assert obs["memory_allocated_reaches_npu"] == 1


def test_symmetric_memory_is_refused_where_asked(obs: dict) -> None:
    assert obs["symm_mem_empty"]["error"] == "CapabilityError"
    assert "torch.distributed._symmetric_memory.empty" in obs["symm_mem_empty"]["message"]


def test_nccl_reaches_hccl(obs: dict) -> None:
    assert obs["pg_backend"] == "hccl"
    assert obs["hccl_created"] == 1


def test_tilelang_probe_sees_the_real_availability(obs: dict) -> None:
    tl = obs["tilelang"]
    if "skipped" in tl:
        pytest.skip(f"tilelang is not importable here: {tl['skipped']}")
    assert tl["probed"] is True  # applied through the import hook: tilelang was imported after the shim
    assert tl["seen_inside_probe"] == [False]  # the CUDA detector saw the truth
    assert tl["auto"] == "ascend"
    assert tl["cuda_available_after_probe"] is True  # and the program's view came back
    # without the probe the same walk picks CUDA on this NPU host: the probe is what changes the answer
    assert tl["seen_unprobed"] == [True] and tl["unprobed"] == "cuda"


def test_environment_and_version_policy(obs: dict) -> None:
    assert obs["tilelang_default_target"] == "ascend"
    assert obs["torch_version_cuda"] is None  # documented policy: left as torch reports it


def test_uninstall_removes_our_fillers_only(obs: dict) -> None:
    after = obs["after_uninstall"]
    assert after["cuda_stream"] is False
    assert after["cuda_graph_is_npugraph"] is True  # upstream's own binding is back
    # TILELANG_DEFAULT_TARGET is the bootstrap's (envs.PLATFORM_ENV), undone by deactivate(), not by the installer
    assert after["probe"] is False
    assert after["cuda_available"] is True  # transfer_to_npu's aliasing stays (it has no undo)


def test_report_on_ascend_lists_aliased_apis(standin_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "ascend.json"
    _, proc = _run(standin_site, "report", CUDASHIM_REPORT=str(out))
    data = json.loads(out.read_text())
    apis = {a["api"]: a for a in data["apis"]}
    assert apis["torch.cuda.Stream"]["treatment"] == "aliased" and apis["torch.cuda.Stream"]["calls"] >= 1
    assert apis["torch.cuda.CUDAGraph"]["calls"] == 2
    assert apis["torch.cuda.CUDAGraph"]["first_call_site"].startswith(str(RUNNER))
    assert apis["torch.cuda.memory._set_allocator_settings"]["treatment"] == "emulated"
    assert apis["torch.distributed._symmetric_memory.empty"]["treatment"] == "unsupported"
    assert apis["torch.cuda.Stream.cuda_stream"]["calls"] >= 2
    assert "cudashim report" in proc.stderr
