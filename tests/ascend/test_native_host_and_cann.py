"""The caching host allocator's settings and statistics, and the simulated CANN installation, on the
simulated NPU (the wheel's package alone over the simulated _C, in a child process): a pinned request
above pinned_max_round_threshold_mb is not rounded to a power of two, a block above
pinned_max_cached_size_mb goes back to the host when freed, the statistics carry the host's timing
counters, the two thresholds with pin_memory_expandable_segments draw torch_npu's warning; events give
their recorded time and take reset(), the FFT plan cache has op-plugin's bounds, a device storage
resizes keeping its bytes; throw_on_npumalloc_oom refuses a block past
per_process_memory_fraction up front and counts it; the runtime API makes raw streams an ExternalStream
wraps; the
simulated CANN is found where CANN's set_env.sh would put it (no warning on stdout, its version
readable as torch_npu reads it); and `import torch` alone loads torch_npu, as where the wheel is
installed. One child answers every part; each test reads its own."""

from __future__ import annotations

from typing import Any

import pytest

from ._wheel import alone_answers

CHILD = r"""
import contextlib, gc, io, json, os, subprocess, sys, warnings

out = {}
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    import torch, torch_npu
out["import_printed"] = printed.getvalue()

from torch_npu.npu.memory import _set_allocator_settings

MB = 1024 * 1024


def part(fn):
    try:
        out[fn.__name__] = fn()
    except Exception as e:  # each part reports its own failure; the others still run
        out[fn.__name__] = {"error": f"{type(e).__name__}: {e}"[:600]}


def held():
    gc.collect()
    return torch_npu.npu.host_memory_stats()["allocated_bytes.current"]


@part
def thresholds():
    torch_npu.npu.host_empty_cache()
    rounded = torch.empty(3 * MB, dtype=torch.uint8).pin_memory()
    rounded_held = held()
    del rounded
    torch_npu.npu.host_empty_cache()
    _set_allocator_settings("pinned_max_round_threshold_mb:2")
    exact = torch.empty(3 * MB, dtype=torch.uint8).pin_memory()
    exact_held = held()
    del exact
    torch_npu.npu.host_empty_cache()
    _set_allocator_settings("pinned_max_round_threshold_mb:1024,pinned_max_cached_size_mb:2")
    big = torch.empty(3 * MB, dtype=torch.uint8).pin_memory()
    del big
    after_big = held()
    small = torch.empty(MB, dtype=torch.uint8).pin_memory()
    del small
    after_small = held()
    torch_npu.npu.host_empty_cache()
    keys = sorted(k for k in torch_npu.npu.host_memory_stats() if k.startswith(("host_alloc_time", "host_free_time")))
    return {"rounded": rounded_held, "exact": exact_held, "after_big": after_big, "after_small": after_small,
            "keys": keys}


@part
def cann_home():
    from torch_npu.utils.collect_env import get_cann_version

    home = os.environ.get("ASCEND_HOME_PATH", "")
    return {"home_exists": os.path.isdir(home), "opp": os.path.isdir(os.environ.get("ASCEND_OPP_PATH", "")),
            "version": get_cann_version(), "reported": torch_npu.npu.utils.get_cann_version()}


@part
def expandable_warning():
    env = dict(os.environ, PYTORCH_NPU_ALLOC_CONF="pin_memory_expandable_segments:True,pinned_max_cached_size_mb:32")
    env.pop("ASCEND_HOME_PATH", None)
    env.pop("ASCEND_OPP_PATH", None)
    code = "import torch\ntorch.empty(64, dtype=torch.uint8).pin_memory()\nprint('pinned', torch.npu.is_available())\n"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    return {"rc": r.returncode, "stdout": r.stdout.strip().splitlines(), "stderr": r.stderr[-1500:]}


@part
def events_fft_storage():
    refused = ""
    try:
        torch_npu.npu.Event().recorded_time()
    except RuntimeError as e:
        refused = str(e)
    a, b = torch_npu.npu.Event(enable_timing=True), torch_npu.npu.Event(enable_timing=True)
    a.record()
    b.record()
    ext = torch.npu.ExternalEvent()
    ext.record(torch.npu.current_stream())
    ext.reset(torch.npu.current_stream())
    cache = torch.npu.backends.fft_plan_cache
    default = cache.max_size
    cache.max_size = 20
    too_big = ""
    try:
        cache.max_size = 100
    except RuntimeError as e:
        too_big = str(e)
    bad_mode = ""
    try:
        torch.npu.set_sync_debug_mode(3)
    except RuntimeError as e:
        bad_mode = str(e)
    x = torch.arange(4.0, device="npu")
    st = x.untyped_storage()
    st.resize_(32)
    grown = torch.empty(0, device="npu").set_(st, 0, (8,)).cpu().tolist()[:4]
    return {"refused": refused, "stamps": [type(a.recorded_time()).__name__, b.recorded_time() > a.recorded_time()],
            "fft": [default, cache.max_size, cache.size], "too_big": too_big, "bad_mode": bad_mode, "resized": [st.nbytes(), grown]}


@part
def device_queries():
    props = torch.npu.get_device_properties(0)
    t = torch.ones(4, device="npu")
    t.record_stream(torch.npu.Stream())
    torch_npu.erase_stream(t, torch.npu.Stream())
    bad = []
    for value in (-1, 2**32):
        try:
            torch_npu.npu.set_op_timeout_ms(value)
        except Exception as e:
            bad.append(str(e))
    return {"uuid": [len(str(props.uuid)), len(props.uuid.bytes), str(torch.npu.get_device_properties(0).uuid)
                     == str(props.uuid)],
            "peer": [torch_npu.npu.can_device_access_peer(0, 0), torch_npu.npu.can_device_access_peer(0, 1)],
            "legacy": [list(torch.npu.FloatTensor().shape), list(torch.npu.FloatTensor(torch.Size([3])).shape)],
            "timeout": bad}


@part
def graph_dump():
    g = torch.npu.NPUGraph()
    x = torch.ones(2, device="npu")
    with torch.npu.stream(torch.npu.Stream()):
        with torch.npu.graph(g):
            x.add_(1)
    try:
        g.debug_dump(os.devnull)
    except RuntimeError as e:
        return {"refused": str(e)}
    return {"refused": ""}


@part
def capture_after_refusal():
    x = torch.ones(2, device="npu")
    out_buf = torch.zeros(2, device="npu")
    g = torch.npu.NPUGraph()
    refused = ""
    with torch.npu.stream(torch.npu.Stream()):
        g.capture_begin()
        try:
            (x + 1).sum().item()
        except RuntimeError as e:
            refused = str(e).splitlines()[0]
        out_buf.copy_(x * 3)
        g.capture_end()
    out_buf.zero_()
    g.replay()
    torch.npu.synchronize()
    return {"refused": refused, "replayed": out_buf.cpu().tolist()}


@part
def runtime_api():
    import ctypes

    rt = torch_npu.npu.npurt()
    raw = ctypes.c_void_p()
    made = rt.npuStreamCreate(ctypes.addressof(raw))
    ext = torch_npu.npu.ExternalStream(raw.value)
    same = ext.npu_stream == raw.value and ext == torch_npu.npu.ExternalStream(raw.value)
    with torch_npu.npu.stream(ext):
        current = torch_npu.npu.current_stream().npu_stream == raw.value
        y = torch.ones(3, device="npu") + 1
    refusals = []
    for call in (ext.synchronize, ext.query):
        try:
            call()
        except RuntimeError as e:
            refusals.append(str(e).splitlines()[0])
    host = torch.ones(16)
    codes = [rt.npuHostRegister(host.data_ptr(), 64, 0x10000000), rt.npuHostUnregister(host.data_ptr()),
             rt.npuHostRegister(host.data_ptr(), 0, 0x10000000), rt.npuStreamCreate(0), rt.npuStreamDestroy(raw.value)]
    return {"made": made, "same": same,
            "current": current, "y": y.cpu().tolist(), "refusals": refusals, "codes": codes}


@part
def oom_rejection():
    torch_npu._C._npu_npuCachingAllocator_set_allocator_settings(
        "throw_on_npumalloc_oom:True,per_process_memory_fraction:0.001")
    torch.npu.empty_cache()
    before = torch.npu.memory_stats()["num_oom_rejections"]
    refused = ""
    try:
        torch.empty(16 * MB, device="npu")  # 64 MiB, past a thousandth of the device
    except torch.OutOfMemoryError as e:
        refused = str(e)
    after = torch.npu.memory_stats()["num_oom_rejections"]
    torch_npu._C._npu_npuCachingAllocator_set_allocator_settings("throw_on_npumalloc_oom:False")
    fits = torch.empty(16 * MB, device="npu").numel()
    torch.npu.reset_accumulated_memory_stats()
    return {"refused": refused, "counted": after - before, "fits": fits,
            "reset": torch.npu.memory_stats()["num_oom_rejections"]}


print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def answers() -> dict[str, Any]:
    return alone_answers(CHILD, timeout=500, unset=("ASCEND_HOME_PATH", "ASCEND_OPP_PATH"))


def test_pinned_thresholds_decide_rounding_and_caching(answers):
    got = answers["thresholds"]
    assert "error" not in got, got  # was: "unsupported setting: pinned_max_round_threshold_mb"
    assert got["rounded"] == 4 * 2**20  # no threshold: 3 MiB rounded up to a power of two
    assert got["exact"] == 3 * 2**20  # above pinned_max_round_threshold_mb: the size asked for
    assert got["after_big"] == 0  # above pinned_max_cached_size_mb: back to the host when freed
    assert got["after_small"] == 2**20  # at most that size: kept in the cache


def test_host_statistics_carry_the_timing_counters(answers):
    got = answers["thresholds"]
    assert "error" not in got, got
    names = [f"{s}.{k}" for s in ("host_alloc_time", "host_free_time") for k in ("avg", "count", "max", "min", "total")]
    assert got["keys"] == names  # was: KeyError 'host_alloc_time.count'


def test_the_simulated_cann_is_installed_where_torch_npu_looks(answers):
    assert answers["import_printed"] == ""  # was: "Warning: ASCEND_HOME_PATH environment variable is not set."
    got = answers["cann_home"]
    assert "error" not in got, got
    assert got["home_exists"] and got["opp"]
    assert got["version"] == got["reported"] != "not known"  # the version file says what the runtime reports


def test_import_torch_loads_torch_npu_and_the_expandable_host_warning_is_given(answers):
    got = answers["expandable_warning"]
    assert "error" not in got, got
    assert got["rc"] == 0, got["stderr"]  # was: "Cannot access accelerator device when none is available"
    assert got["stdout"][-1] == "pinned True"
    assert "pinned_max_cached_size_mb" in got["stderr"] and "pin_memory_expandable_segments" in got["stderr"]


def test_events_fft_plan_cache_and_storage_resize_as_torch_npu(answers):
    got = answers["events_fft_storage"]
    assert "error" not in got, got  # was: "'super' object has no attribute 'recorded_time'" (then 'reset')
    assert "Event must be recorded before getting recorded timestamp" in got["refused"]
    assert got["stamps"] == ["int", True]  # a later event's timestamp is later
    assert got["fft"] == [10, 20, 0]  # op-plugin's cache: 10 plans unless set; was: a device argument asked for
    assert "expected 1 to 99" in got["too_big"]
    assert "invalid value of debug_mode, expected one of 0,1,2" in got["bad_mode"]  # was: accepted
    assert got["resized"] == [32, [0.0, 1.0, 2.0, 3.0]]  # was: "implement `resizePrivateUse1Bytes`"


def test_throw_on_npumalloc_oom_refuses_past_the_fraction_and_counts_it(answers):
    got = answers["oom_rejection"]
    assert "error" not in got, got  # was: no refusal, num_oom_rejections always 0
    assert "preemptively rejected because it would exceed per_process_memory_fraction" in got["refused"]
    assert got["counted"] == 1 and got["reset"] == 0
    assert got["fits"] == 16 * 2**20  # with the switch off the fraction of the settings does not refuse


def test_device_queries_answer_as_torch_npus_bindings(answers):
    got = answers["device_queries"]
    assert "error" not in got, got  # was: erase_stream's keywords refused
    assert got["uuid"] == [36, 16, True]  # was: a string of no UUID's form
    assert got["peer"] == [False, True]  # a device is not its own peer
    assert got["legacy"] == [[0], [3]]  # was: FloatTensor() refused, FloatTensor(Size) taken as data
    assert "can't convert negative value to unsigned int" in got["timeout"][0]
    assert "Overflow when unpacking" in got["timeout"][1]


def test_a_captured_graphs_dump_is_canns_own(answers):
    got = answers["graph_dump"]
    assert "error" not in got, got  # was: "CUDA Graphs debug not enabled" (CUDA's rule, not torch_npu's)
    assert "aclmdlRIDebugJsonPrint" in got["refused"] and "ERR00007 PTA feature not supported" in got["refused"]


def test_a_refused_item_leaves_the_npu_capture_going(answers):
    got = answers["capture_after_refusal"]
    assert "error" not in got, got  # was: capture_end "the capture was invalidated by an earlier refusal (item)"
    assert "not permitted while a stream is being captured" in got["refused"]
    assert got["replayed"] == [3.0, 3.0]  # the capture went on past the refusal and replays


def test_runtime_api_makes_raw_streams_external_streams_wrap(answers):
    got = answers["runtime_api"]
    assert "error" not in got, got  # was: "module 'torch_npu._C._npurt' has no attribute 'npuStreamCreate'"
    assert got["made"] == 0 and got["same"] and got["current"] and got["y"] == [2.0, 2.0, 2.0]
    assert got["refusals"][0].startswith("External NPU stream is not supported in NPUStream::synchronize")
    assert got["refusals"][1].startswith("Cannot query external NPU stream status")
    assert got["codes"] == [0, 0, 100000, 100000, 0]  # ACL_ERROR_INVALID_PARAM for a zero size and a null pointer
