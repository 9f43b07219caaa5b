"""The environment table, allocator translation, visibility reconciliation and launcher helpers, in-process.

These functions are pure over an environ dict, so no fresh interpreter is needed; the process-wide
behaviour (ordering before torch, exec, sitecustomize) is tested in tests/subprocess/.
"""

from __future__ import annotations

import os

import pytest

from cudashim import envs, visibility
from cudashim.cli import run as launcher
from cudashim.errors import EnvError, VisibilityError

_ASCEND_DEFAULTS = {
    "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
    "TASK_QUEUE_ENABLE": "0",
    "HCCL_BUFFSIZE": "16",
    "HCCL_CONNECT_TIMEOUT": "240",
    "HCCL_EXEC_TIMEOUT": "200",
    "HCCL_HOST_SOCKET_PORT_RANGE": "auto",
    "HCCL_NPU_SOCKET_PORT_RANGE": "auto",
    "TILELANG_DEFAULT_TARGET": "ascend",
}


def test_ascend_defaults_on_an_empty_environment_and_undo_restores_it():
    env: dict[str, str] = {}
    changes = envs.apply_platform_env("ascend", env)
    assert env == _ASCEND_DEFAULTS
    envs.undo(changes, env)
    assert env == {}


def test_user_values_win_except_where_the_shim_owns_the_variable():
    env = {"HCCL_EXEC_TIMEOUT": "1000", "TILELANG_DEFAULT_TARGET": "cuda", "TASK_QUEUE_ENABLE": "2", "HCCL_BUFFSIZE": "16"}
    notes: list[str] = []
    changes = envs.apply_platform_env("ascend", env, notes=notes)
    assert env["HCCL_EXEC_TIMEOUT"] == "1000" and env["TILELANG_DEFAULT_TARGET"] == "cuda"
    assert env["TASK_QUEUE_ENABLE"] == "0"
    assert len(notes) == 1 and "TASK_QUEUE_ENABLE='2' overridden to '0'" in notes[0]  # HCCL_BUFFSIZE already right
    envs.undo(changes, env)
    assert env == {"HCCL_EXEC_TIMEOUT": "1000", "TILELANG_DEFAULT_TARGET": "cuda", "TASK_QUEUE_ENABLE": "2", "HCCL_BUFFSIZE": "16"}


def test_second_application_changes_nothing():
    # a child process inherits what its parent's bootstrap set: it must not warn or translate again
    env = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    envs.apply_platform_env("ascend", env, notes=[])
    notes: list[str] = []
    assert envs.apply_platform_env("ascend", env, notes=notes) == [] and notes == []


@pytest.mark.parametrize("cuda_conf, npu_conf, dropped", [
    ("max_split_size_mb:128", "max_split_size_mb:128", ()),
    ("expandable_segments:False", "expandable_segments:False", ()),
    ("backend:cudaMallocAsync", "expandable_segments:True", ("backend",)),
    ("roundup_power2_divisions:[256:1,512:2],pinned_use_cuda_host_register:True",
     "expandable_segments:True,roundup_power2_divisions:[256:1,512:2]", ("pinned_use_cuda_host_register",)),
    ("release_lock_on_cudamalloc:True", "expandable_segments:True,release_lock_on_npumalloc:True", ()),
    ("garbage_collection_threshold:0.6, max_split_size_mb:64", "garbage_collection_threshold:0.6,max_split_size_mb:64", ()),
])
def test_cuda_allocator_settings_translate_to_the_npu_allocator(cuda_conf, npu_conf, dropped):
    assert envs.translate_alloc_conf(cuda_conf) == (npu_conf, dropped)
    env = {"PYTORCH_CUDA_ALLOC_CONF": cuda_conf}
    notes: list[str] = []
    envs.apply_platform_env("ascend", env, notes=notes)
    assert env["PYTORCH_NPU_ALLOC_CONF"] == npu_conf
    assert len(notes) == (1 if dropped else 0)
    assert all(repr(k) in notes[0] for k in dropped)


def test_explicit_npu_or_generic_allocator_settings_are_left_alone():
    env = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:1", "PYTORCH_NPU_ALLOC_CONF": "page_size:1g"}
    envs.apply_platform_env("ascend", env)
    assert env["PYTORCH_NPU_ALLOC_CONF"] == "page_size:1g"
    # PYTORCH_ALLOC_CONF alone: torch_npu reads it; adding an NPU value would make two settings
    env = {"PYTORCH_ALLOC_CONF": "max_split_size_mb:8"}
    envs.apply_platform_env("ascend", env)
    assert "PYTORCH_NPU_ALLOC_CONF" not in env
    # equal values are what a child of a torch_npu process inherits: accepted
    env = {"PYTORCH_ALLOC_CONF": "page_size:1g", "PYTORCH_NPU_ALLOC_CONF": "page_size:1g"}
    envs.apply_platform_env("ascend", env)


def test_two_different_allocator_settings_are_refused_without_changing_anything():
    env = {"PYTORCH_ALLOC_CONF": "a:1", "PYTORCH_NPU_ALLOC_CONF": "b:2"}
    with pytest.raises(EnvError, match="PYTORCH_NPU_ALLOC_CONF='b:2' and PYTORCH_ALLOC_CONF='a:1'"):
        envs.apply_platform_env("ascend", env)
    assert env == {"PYTORCH_ALLOC_CONF": "a:1", "PYTORCH_NPU_ALLOC_CONF": "b:2"}


def test_nccl_interface_carries_over_to_hccl():
    env = {"NCCL_SOCKET_IFNAME": "eth1"}
    envs.apply_platform_env("ascend", env)
    assert env["HCCL_SOCKET_IFNAME"] == "eth1"
    env = {"NCCL_SOCKET_IFNAME": "eth1", "HCCL_SOCKET_IFNAME": "ib0"}
    envs.apply_platform_env("ascend", env)
    assert env["HCCL_SOCKET_IFNAME"] == "ib0"


def test_nvidia_and_cpu_tables(monkeypatch):
    env: dict[str, str] = {}
    envs.apply_platform_env("nvidia", env)
    assert env == {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    monkeypatch.setitem(envs._CONDITIONS, "torch_npu_installed", lambda: False)
    env = {}
    envs.apply_platform_env("cpu", env)
    assert env == {}
    monkeypatch.setitem(envs._CONDITIONS, "torch_npu_installed", lambda: True)
    envs.apply_platform_env("cpu", env)
    assert env == {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def test_table_is_well_formed():
    seen = set()
    for rule in envs.PLATFORM_ENV:
        assert rule.platform in ("ascend", "nvidia", "cpu") and rule.mode in ("default", "owned")
        assert rule.value is not None or rule.source is not None
        assert rule.when is None or rule.when in envs._CONDITIONS
        assert (rule.platform, rule.name) not in seen and rule.why
        seen.add((rule.platform, rule.name))


# --- visibility --------------------------------------------------------------------------------


def test_ascend_copies_the_one_set_variable_both_ways():
    for given, other in (("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"), ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")):
        env = {given: "1,4"}
        notes: list[str] = []
        changes = visibility.reconcile("ascend", env, notes=notes)
        assert env == {given: "1,4", other: "1,4"} and len(notes) == 1
        envs.undo(changes, env)
        assert env == {given: "1,4"}


def test_ascend_accepts_equal_lists_written_differently():
    env = {"CUDA_VISIBLE_DEVICES": "0, 1", "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    assert visibility.reconcile("ascend", env) == []


@pytest.mark.parametrize("env, match", [
    ({"CUDA_VISIBLE_DEVICES": "0,1", "ASCEND_RT_VISIBLE_DEVICES": "1,0"}, "ascending"),
    ({"CUDA_VISIBLE_DEVICES": "0", "ASCEND_RT_VISIBLE_DEVICES": "1"}, "differ"),
    ({"ASCEND_RT_VISIBLE_DEVICES": "0,0"}, "twice"),
    ({"ASCEND_RT_VISIBLE_DEVICES": "0,1", "LOCAL_RANK": "1", "CUDASHIM_DEVICES_PER_RANK": "2"}, "only 2 are available"),
    ({"ASCEND_RT_VISIBLE_DEVICES": "0,1", "LOCAL_RANK": "0", "CUDASHIM_DEVICES_PER_RANK": "0"}, "no device"),
])
def test_ascend_refusals_change_nothing(env, match):
    before = dict(env)
    with pytest.raises(VisibilityError, match=match):
        visibility.reconcile("ascend", env)
    assert env == before


def test_per_rank_slices_once_per_process_tree():
    env = {"ASCEND_RT_VISIBLE_DEVICES": "2,3,4,5", "LOCAL_RANK": "1", "CUDASHIM_DEVICES_PER_RANK": "2"}
    visibility.reconcile("ascend", env)
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"] == "4,5"
    # a child of that rank inherits LOCAL_RANK and the narrowed list: it must not slice again
    child = dict(env)
    assert visibility.reconcile("ascend", child) == [] and child == env


def test_nvidia_leaves_visibility_alone_unless_assigning_ranks():
    env = {"CUDA_VISIBLE_DEVICES": "GPU-8c3a,GPU-11ef", "ASCEND_RT_VISIBLE_DEVICES": "9"}
    assert visibility.reconcile("nvidia", env) == []  # UUIDs are legal for CUDA; not ours to judge
    env = {"CUDA_VISIBLE_DEVICES": "3,1,7,5", "LOCAL_RANK": "1", "CUDASHIM_DEVICES_PER_RANK": "2"}
    visibility.reconcile("nvidia", env)
    assert env["CUDA_VISIBLE_DEVICES"] == "7,5" and "ASCEND_RT_VISIBLE_DEVICES" not in env


def test_cpu_checks_visibility_like_cuda_and_validates_shim_variables():
    # issue 16: garbage was ignored on cpu; CUDA refuses it, and so does the shim, naming the value
    with pytest.raises(VisibilityError, match="CUDA_VISIBLE_DEVICES='whatever'"):
        visibility.reconcile("cpu", {"CUDA_VISIBLE_DEVICES": "whatever"})
    assert visibility.reconcile("cpu", {"CUDA_VISIBLE_DEVICES": ""}) == []  # valid: hides every device
    with pytest.raises(EnvError, match="CUDASHIM_DEVICES_PER_RANK"):
        visibility.reconcile("cpu", {"CUDASHIM_DEVICES_PER_RANK": "x"})


# --- launcher helpers ---------------------------------------------------------------------------


def test_python_path_puts_the_bootstrap_first_once_and_keeps_user_entries():
    b = launcher.BOOTSTRAP_DIR
    assert launcher.python_path(None) == b
    assert launcher.python_path(os.pathsep.join(["/u1", b, "", "/u2"])) == os.pathsep.join([b, "/u1", "/u2"])


def test_command_forms(tmp_path, monkeypatch):
    script = tmp_path / "s.py"
    script.write_text("")
    extless = tmp_path / "tool"
    extless.write_text("")
    monkeypatch.setattr(launcher, "_interpreter_options", lambda: ["-X", "dev"])
    py = launcher.sys.executable
    assert launcher.build_command([str(script), "a"]) == (py, [py, "-X", "dev", str(script), "a"], str(tmp_path))
    assert launcher.build_command(["-m", "pkg.mod", "a"])[1] == [py, "-X", "dev", "-m", "pkg.mod", "a"]
    file, argv, _ = launcher.build_command(["sh", "-c", "true"])
    assert os.path.basename(file) == "sh" and argv == ["sh", "-c", "true"]
    assert launcher.build_command([str(extless)])[1] == [py, "-X", "dev", str(extless)]
    with pytest.raises(FileNotFoundError):
        launcher.build_command([str(tmp_path / "nope.py")])
    assert launcher._parse(["--platform=cpu", "--report", "r.json", "x.py", "--platform", "y"]) == (
        {"platform": "cpu", "report": "r.json"}, ["x.py", "--platform", "y"])


@pytest.mark.parametrize("orig, expected", [
    (["py", "-X", "dev", "-u", "-W", "error", "-m", "cudashim", "run", "s.py"], ["-X", "dev", "-u", "-W", "error"]),
    (["py", "-mcudashim", "run", "s.py"], []),
    (["py", "-O", "-m", "other", "-m", "cudashim"], []),
    (["py", "tool.py", "-m", "cudashim"], []),
    (["/usr/bin/cudashim", "run", "s.py"], []),
])
def test_interpreter_options_pass_through_only_when_started_as_python_m_cudashim(monkeypatch, orig, expected):
    monkeypatch.setattr(launcher.sys, "orig_argv", orig)
    assert launcher._interpreter_options() == expected
