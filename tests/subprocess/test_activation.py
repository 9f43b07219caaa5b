"""`cudashim run` and the trampolines, in fresh interpreters: what the first user line sees."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest


_STATUS = "import json, sys, cudashim as b; print(json.dumps([b.status(), 'torch' in sys.modules]))"


def _last_json(stdout: str):
    return json.loads(stdout.strip().splitlines()[-1])


def test_first_user_line_runs_after_the_bootstrap_and_before_torch(shim, tmp_path):
    r = shim.run(["-c", _STATUS], shim.env(CUDASHIM_DEBUG="1"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    status, torch_loaded = _last_json(r.stdout)
    assert status["active"] and status["source"] == "bootstrap" and status["platform"] == "cpu"
    assert status["bootstrap_runs"] == 1
    assert not torch_loaded  # the bootstrap itself never imports torch
    assert sum(shim.bootstraps(r.stderr).values()) == 1


@pytest.mark.skipif(importlib.util.find_spec("cudashim.installers.cpu") is None,
                    reason="the cpu installer (cudashim/installers/cpu.py) has not landed yet")
def test_hello_cuda_runs_unchanged_on_cpu(shim, tmp_path):
    r = shim.run([str(shim.repo / "examples" / "hello_cuda.py")], shim.env(CUDASHIM_DEBUG="1"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "hello from" in r.stdout
    # the trace line comes from the bootstrap, before the script's first line imported torch
    assert sum(shim.bootstraps(r.stderr).values()) == 1


def _stand_ins(root: Path) -> Path:
    """A folder with stand-in `torch` and `torch_npu` that record os.environ when imported."""
    site = root / "standins"
    for name, body in {
        "torch": "import torch_npu  # what torch >= 2.5 does through its device-backend autoload\n",
        "torch_npu": "",
    }.items():
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(textwrap.dedent(f"""\
            import json, os
            with open(os.path.join(os.environ["PROBE_DIR"], "{name}.json"), "w") as f:
                json.dump(dict(os.environ), f)
            {body}"""))
    return site


def test_visibility_and_npu_environment_are_settled_before_torch_and_torch_npu_import(shim, tmp_path):
    """Proves ORDERING only: at the moment `import torch` starts, and at the moment torch_npu is imported
    (from torch's own import, as torch >= 2.5 autoloads it), the environment already holds the reconciled
    visible devices and the NPU defaults. The stand-ins record os.environ and nothing else, so this says
    nothing about NPU behaviour, torch_npu's reading of these variables, or the ascend alias layer."""
    site = _stand_ins(tmp_path)
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent("""\
        try:
            import torch
        except Exception as e:  # the ascend alias layer cannot work over stand-ins; not what is tested
            print("ascend alias layer over stand-ins:", type(e).__name__)
        print("done")
    """))
    env = shim.env(site, PROBE_DIR=str(tmp_path), ASCEND_RT_VISIBLE_DEVICES="2,3",
                   PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:64,backend:cudaMallocAsync",
                   HCCL_CONNECT_TIMEOUT="999", TASK_QUEUE_ENABLE="1")
    r = shim.run(["--platform", "ascend", str(script)], env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout
    for name in ("torch", "torch_npu"):
        seen = json.loads((tmp_path / f"{name}.json").read_text())
        assert seen["CUDA_VISIBLE_DEVICES"] == "2,3", name  # copied from ASCEND_RT_VISIBLE_DEVICES
        assert seen["ASCEND_RT_VISIBLE_DEVICES"] == "2,3", name
        # translated: the NPU allocator has no `backend`; expandable segments cannot join max_split_size_mb
        assert seen["PYTORCH_NPU_ALLOC_CONF"] == "max_split_size_mb:64", name
        assert seen["TASK_QUEUE_ENABLE"] == "0", name  # owned by the shim: the user's 1 is overridden
        assert seen["HCCL_BUFFSIZE"] == "16", name
        assert seen["HCCL_CONNECT_TIMEOUT"] == "999", name  # set-if-absent: the user's value wins
        assert seen["HCCL_EXEC_TIMEOUT"] == "200", name
        assert seen["HCCL_HOST_SOCKET_PORT_RANGE"] == seen["HCCL_NPU_SOCKET_PORT_RANGE"] == "auto", name
        assert seen["TILELANG_DEFAULT_TARGET"] == "ascend", name
    # each adjustment is said once, naming what was done
    assert r.stderr.count("CUDA_VISIBLE_DEVICES copied from ASCEND_RT_VISIBLE_DEVICES") == 1
    assert r.stderr.count("'backend'") == 1
    assert r.stderr.count("TASK_QUEUE_ENABLE='1' overridden") == 1


def test_cpu_turns_off_torch_backend_autoload_only_when_torch_npu_is_installed(shim, tmp_path):
    show = "import os; print(os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD'))"
    with_npu = shim.run(["-c", show], shim.env(_stand_ins(tmp_path), PROBE_DIR=str(tmp_path)), cwd=tmp_path)
    without = shim.run(["-c", show], shim.env(), cwd=tmp_path)
    assert (with_npu.returncode, without.returncode) == (0, 0), with_npu.stderr + without.stderr
    assert with_npu.stdout.split() == ["0"]
    assert without.stdout.split() == ["None"]
    assert not (tmp_path / "torch_npu.json").exists()  # located, never imported


def _user_sitecustomize(root: Path) -> Path:
    d = root / "usersite"
    d.mkdir()
    (d / "sitecustomize.py").write_text(textwrap.dedent("""\
        import os, sys
        with open(os.environ["USC_LOG"], "a") as f:  # the `cudashim run` launcher is an interpreter too
            f.write(f"{os.getpid()}{'-launcher' if 'run' in sys.orig_argv else ''}\\n")
        USER_MARK = "mine"
    """))
    return d


_USC = ("import json, os, sys, sitecustomize, cudashim as b; "
        "print(json.dumps([os.getpid(), getattr(sitecustomize, 'USER_MARK', None), b.status()]))")


def test_user_sitecustomize_runs_once_under_run_and_under_each_trampoline(shim, tmp_path):
    usc = _user_sitecustomize(tmp_path)
    log = tmp_path / "usc.log"
    runs = {
        "run": shim.run(["-c", _USC], shim.env(usc, USC_LOG=str(log), CUDASHIM_DEBUG="1"), cwd=tmp_path),
        # both trampolines on the path, in either order: one bootstrap, the user's file once
        "installed+repo": shim.python(["-c", _USC], shim.env(shim.bootstrap_dir, shim.repo, usc, USC_LOG=str(log), CUDASHIM_DEBUG="1"), cwd=tmp_path),
        "repo+installed": shim.python(["-c", _USC], shim.env(shim.repo, shim.bootstrap_dir, usc, USC_LOG=str(log), CUDASHIM_DEBUG="1"), cwd=tmp_path),
        "disabled": shim.run(["-c", _USC], shim.env(usc, USC_LOG=str(log), CUDASHIM_DISABLE="1"), cwd=tmp_path),
    }
    pids = []
    for what, r in runs.items():
        assert r.returncode == 0, (what, r.stderr)
        pid, mark, status = _last_json(r.stdout)
        pids.append(pid)
        assert mark == "mine", what  # `import sitecustomize` gives the user's module, as without the shim
        assert status["chained_sitecustomize"] == str(usc / "sitecustomize.py"), what
        assert status["active"] is (what != "disabled"), what
        assert sum(shim.bootstraps(r.stderr).values()) == (0 if what == "disabled" else 1), what
    # once per interpreter, nothing twice: the launcher's python runs it too, so the program runs
    # in a child process of its own (exec would have run it a second time in the launcher's pid)
    run, both, both_reversed, disabled = map(str, pids)
    lines = log.read_text().split()
    assert lines[1:4] == [run, both, both_reversed] and lines[5] == disabled, lines
    assert lines[0].endswith("-launcher") and lines[4].endswith("-launcher"), lines
    assert lines[0] != f"{run}-launcher" and lines[4] != f"{disabled}-launcher", lines


def test_activate_and_deactivate_in_code_leave_the_process_as_found(shim, tmp_path):
    site = _stand_ins(tmp_path)
    code = textwrap.dedent("""\
        import json, os, sys, warnings
        import cudashim
        before_env, before_path = dict(os.environ), list(sys.meta_path)
        assert cudashim.activate(platform="ascend") == "ascend"
        during = dict(os.environ)
        finder_on = len(sys.meta_path) > len(before_path)
        cudashim.deactivate()
        cudashim.deactivate()  # idempotent
        restored = dict(os.environ) == before_env and sys.meta_path == before_path
        # after torch is imported: a warning, and the installer runs at once
        import torch  # the stand-in
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                cudashim.activate(platform="cpu")
            except Exception as e:
                late = type(e).__name__
            else:
                late = "ok"
        print(json.dumps([during.get("CUDA_VISIBLE_DEVICES"), during.get("TASK_QUEUE_ENABLE"), finder_on,
                          restored, late, [str(x.message) for x in w]]))
    """)
    r = shim.python(["-c", code], shim.env(site, PROBE_DIR=str(tmp_path), ASCEND_RT_VISIBLE_DEVICES="1"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cuda, tq, finder_on, restored, late, warned = _last_json(r.stdout)
    assert (cuda, tq, finder_on, restored) == ("1", "0", True, True)
    assert any("after `import torch`" in m for m in warned)
    # the cpu installer over a stand-in torch either installs or fails loudly; never silently skipped
    assert late in ("ok", "AttributeError", "ModuleNotFoundError", "ImportError", "CapabilityError", "TypeError",
                    "UnsupportedTorchError")  # the stand-in's torch version is outside the supported range


def test_config_next_to_the_script_decides_for_the_whole_process(shim, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "cudashim.toml").write_text('platform = "nvidia"\n')
    (app / "main.py").write_text(
        "import json, cudashim, cudashim as b\n"
        "print(json.dumps([b.status()['platform'], b.status()['config'], cudashim.get_platform().name]))\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = shim.run([str(app / "main.py")], cwd=elsewhere)  # the working directory holds no config
    assert r.returncode == 0, r.stderr
    assert _last_json(r.stdout) == ["nvidia", str(app / "cudashim.toml"), "nvidia"]


def test_bootstrap_called_from_code_does_not_run_the_user_sitecustomize_again(shim, tmp_path):
    usc = _user_sitecustomize(tmp_path)
    log = tmp_path / "usc.log"
    code = "import cudashim._bootstrap as b; b.bootstrap(); b.bootstrap(); " + _USC
    r = shim.python(["-c", code], shim.env(usc, USC_LOG=str(log)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pid, mark, status = _last_json(r.stdout)
    assert mark == "mine" and status["active"] and status["bootstrap_runs"] == 1
    assert log.read_text().split() == [str(pid)]
