"""What the simulated torch_npu._C answers, held to torch_npu's C++ (Ascend/pytorch at the wheel's tag):
the allocator settings NPUAllocatorConfig::parseArgs accepts and refuses, and the CANN version queries
of GetCANNInfo.cpp over a configurable simulated CANN version."""

from __future__ import annotations

import pytest

from cudashim.emulated.npu import natives


@pytest.mark.parametrize("conf", ["expandable_segments:True", "max_split_size_mb:64", "release_lock_on_npumalloc:True",
                                  "throw_on_npumalloc_oom:False,per_process_memory_fraction:1.0",
                                  "pinned_max_round_threshold_mb:64", "pinned_max_cached_size_mb:32",
                                  "max_non_split_rounding_mb:20"])
def test_the_runtime_allocator_settings_torch_npus_tests_set_are_accepted(conf, monkeypatch):
    monkeypatch.setattr(natives, "_SETTINGS", {})
    got = natives.parse_allocator_settings(conf, natives.RUNTIME_SETTINGS)
    assert set(got) == {part.split(":")[0] for part in conf.split(",")}


@pytest.mark.parametrize("conf", ["garbage_collection_threshold:0.6", "roundup_power2_divisions:[64:8,>:1]",
                                  "segment_size_mb:20"])
def test_start_up_only_allocator_settings_are_refused_at_run_time(conf, monkeypatch):
    # setAllocatorSettings hands parseArgs its list of eight keys; a key torch_npu takes only from
    # PYTORCH_NPU_ALLOC_CONF is refused at run time
    monkeypatch.setattr(natives, "_SETTINGS", {})
    natives.parse_allocator_settings(conf)
    with pytest.raises(ValueError, match=r"_set_allocator_settings\(\) unsupported setting"):
        natives.parse_allocator_settings(conf, natives.RUNTIME_SETTINGS)


def test_a_bad_switch_of_torch_npus_own_keys_is_a_runtime_error_as_torch_check_raises(monkeypatch):
    monkeypatch.setattr(natives, "_SETTINGS", {})
    with pytest.raises(RuntimeError, match="Expected a single True/False argument for throw_on_npumalloc_oom"):
        natives.parse_allocator_settings("throw_on_npumalloc_oom:maybe", natives.RUNTIME_SETTINGS)
    with pytest.raises(ValueError, match="Expected a single True/False argument for expandable_segments"):
        natives.parse_allocator_settings("expandable_segments:maybe", natives.RUNTIME_SETTINGS)


def test_allocator_settings_torch_npu_refuses_are_refused_in_its_words(monkeypatch):
    monkeypatch.setattr(natives, "_SETTINGS", {})
    with pytest.raises(ValueError, match="Unrecognized key 'no_such_key' in NPU allocator config"):
        natives.parse_allocator_settings("no_such_key:1")
    with pytest.raises(ValueError, match="torch_npu not support key 'pinned_num_register_threads'"):
        natives.parse_allocator_settings("pinned_num_register_threads:4")
    with pytest.raises(ValueError, match=r"_set_allocator_settings\(\) unsupported setting: base_addr_aligned_kb"):
        natives.parse_allocator_settings("base_addr_aligned_kb:16", natives.RUNTIME_SETTINGS)
    with pytest.raises(ValueError, match="must be \\[0~16\\]"):
        natives.parse_allocator_settings("base_addr_aligned_kb:32")
    with pytest.raises(RuntimeError, match="cannot be enabled with `expandable_segments`"):
        natives.parse_allocator_settings("expandable_segments:True,max_split_size_mb:64")


def test_cann_version_is_configurable_and_compared_as_torch_npu_compares(monkeypatch):
    monkeypatch.setenv("CUDASHIM_CANN_VERSION", "8.3.RC1")
    assert natives.cann_version() == "8.3.RC1" and natives.cann_version("RUNTIME") == "8.3.RC1"
    assert natives.cann_version("no-such-module") == ""
    assert natives.is_gte_cann_version("8.2.RC1") and natives.is_gte_cann_version("8.3.RC1")
    assert not natives.is_gte_cann_version("8.3.0")  # a release comes after its release candidates
    assert not natives.is_gte_cann_version("9.0.0")
    with pytest.raises(RuntimeError, match="DRIVER, IsGteCANNVersion is not supported"):
        natives.is_gte_cann_version("8.3.RC1", "DRIVER")
    with pytest.raises(RuntimeError, match='less than "8.1.RC1"'):
        natives.is_gte_cann_version("8.0.RC1")
    monkeypatch.delenv("CUDASHIM_CANN_VERSION")
    assert natives.cann_version() == natives.DEFAULT_CANN_VERSION


def test_what_needs_cann_raises_torch_npus_error():
    call = natives._cann_required("_C._npu_to_dlpack", "DLPack over ACL memory")
    with pytest.raises(natives.CannRequired, match="ERR00007 PTA feature not supported") as e:
        call()
    assert isinstance(e.value, RuntimeError) and "needs CANN (DLPack over ACL memory)" in str(e.value)


EMPTY_STRIDED = r"""
import json, torch, torch_npu
t = torch_npu._C._empty_strided_npu((2, 3), (1, 2), torch.float16)
out = {"device": str(t.device), "stride": list(t.stride()), "dtype": str(t.dtype)}
try:
    torch_npu._C._empty_strided_npu((2, 3), (3, 1), "float")
except RuntimeError as e:
    out["bad_dtype"] = str(e)
print(json.dumps(out))
"""


def test_empty_strided_npu_fast_path_makes_an_npu_tensor_of_the_given_strides():
    import json
    import subprocess
    import sys
    from pathlib import Path

    from cudashim.emulated.npu.site import alone_env, fetch_wheel

    if fetch_wheel()[0] is None:
        pytest.skip("the simulated torch_npu is assembled from the torch-npu wheel")
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", EMPTY_STRIDED], env=alone_env(root), capture_output=True, text=True,
                       timeout=600, cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"device": "npu:0", "stride": [1, 2], "dtype": "torch.float16",
                   "bad_dtype": "_empty_strided_npu: arg 3 must be a torch.dtype"}
