"""Bad input to `cudashim run` and to the bootstrap, in fresh interpreters.

Under `cudashim run` (strict) every bootstrap error stops the process before user code with exit
code 2 and one message naming the cause; under a bare PYTHONPATH activation the program runs on,
unshimmed, after a loud warning, and whatever the bootstrap had changed is undone.
"""

from __future__ import annotations

import json
import signal
import textwrap

import pytest

# the user program: proves it ran (or did not) and shows the environment the bootstrap left
_PROBE = ("import json, os, sys, cudashim as b; print('USER CODE RAN'); "
          "print(json.dumps([b.status()['active'], os.environ.get('CUDA_VISIBLE_DEVICES'), "
          "os.environ.get('TASK_QUEUE_ENABLE'), [type(f).__module__ for f in sys.meta_path]]))")


def _stopped(r, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "USER CODE RAN" not in r.stdout
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


def test_unknown_platform_option_and_nothing_to_run(shim, tmp_path):
    _stopped(shim.run(["--platform", "gpu", "-c", _PROBE], cwd=tmp_path), "'gpu' is not a platform", "ascend, nvidia, cpu")
    _stopped(shim.run(["--platform"], cwd=tmp_path), "--platform needs a value")
    _stopped(shim.run(["--frobnicate", "-c", _PROBE], cwd=tmp_path), "unknown option '--frobnicate'")
    _stopped(shim.run([], cwd=tmp_path), "nothing to run")
    _stopped(shim.run(["--config", str(tmp_path / "nope.toml"), "-c", _PROBE], cwd=tmp_path), "nope.toml", "no such file")


def test_missing_script_exits_2_like_python(shim, tmp_path):
    plain = shim.python([str(tmp_path / "missing.py")], cwd=tmp_path)
    shimmed = shim.run([str(tmp_path / "missing.py")], cwd=tmp_path)
    assert plain.returncode == shimmed.returncode == 2
    assert "can't open file" in plain.stderr and "can't open file" in shimmed.stderr
    assert str(tmp_path / "missing.py") in shimmed.stderr


_SCRIPT = textwrap.dedent("""\
    import os, signal, sys
    print(__name__, sys.argv[1:], sys.stdin.read().strip(), flush=True)
    what = sys.argv[1]
    if what == "raise":
        def inner():
            raise ValueError("boom " + sys.argv[2])
        inner()
    elif what == "exit":
        sys.exit(int(sys.argv[2]))
    elif what == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
""")


@pytest.mark.parametrize("args", [["raise", "x y"], ["exit", "7"], ["signal", "-"]])
def test_script_behaves_exactly_as_under_plain_python(shim, tmp_path, args):
    script = tmp_path / "prog.py"
    script.write_text(_SCRIPT)
    plain = shim.python([str(script), *args], cwd=tmp_path, input="from stdin\n")
    shimmed = shim.run([str(script), *args], cwd=tmp_path, input="from stdin\n")
    assert shimmed.returncode == plain.returncode
    assert shimmed.stdout == plain.stdout  # __main__, argv, stdin
    assert shimmed.stderr == plain.stderr  # the same traceback, line for line
    assert plain.returncode == {"raise": 1, "exit": 7, "signal": -signal.SIGTERM}[args[0]]
    assert plain.stdout.startswith(f"__main__ {args!r} from stdin")


def test_module_mode_behaves_as_python_dash_m(shim, tmp_path):
    (tmp_path / "pkgx").mkdir()
    (tmp_path / "pkgx" / "__init__.py").write_text("")
    (tmp_path / "pkgx" / "tool.py").write_text(_SCRIPT)
    plain = shim.python(["-m", "pkgx.tool", "exit", "3"], cwd=tmp_path, input="in")
    shimmed = shim.run(["-m", "pkgx.tool", "exit", "3"], cwd=tmp_path, input="in")
    assert (shimmed.returncode, shimmed.stdout, shimmed.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == 3


@pytest.mark.parametrize("extra, needles", [
    ({"CUDASHIM_DEVICES_PER_RANK": "two", "LOCAL_RANK": "0"}, ["CUDASHIM_DEVICES_PER_RANK='two'", "not an integer"]),
    ({"LOCAL_RANK": "first"}, ["LOCAL_RANK='first'"]),
    ({"CUDASHIM_PLATFORM": "gpu"}, ["CUDASHIM_PLATFORM='gpu'", "ascend, nvidia or cpu"]),
    ({"CUDASHIM_DISABLE": "maybe"}, ["CUDASHIM_DISABLE='maybe'", "not a boolean"]),
    ({"CUDASHIM_PLATFORM": "ascend", "ASCEND_RT_VISIBLE_DEVICES": "0,x"}, ["ASCEND_RT_VISIBLE_DEVICES='0,x'"]),
    ({"CUDASHIM_PLATFORM": "ascend", "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
      "PYTORCH_ALLOC_CONF": "max_split_size_mb:64"}, ["PYTORCH_NPU_ALLOC_CONF=", "PYTORCH_ALLOC_CONF=", "unset one"]),
])
def test_malformed_environment_stops_before_user_code(shim, tmp_path, extra, needles):
    r = shim.run(["-c", _PROBE], shim.env(**extra), cwd=tmp_path)
    _stopped(r, "cudashim: cannot start:", *needles)
    assert r.stderr.count("cudashim: cannot start:") == 1  # one message


@pytest.mark.parametrize("cuda, ascend, needles", [
    ("0,1", "0,2", ["CUDA_VISIBLE_DEVICES='0,1'", "ASCEND_RT_VISIBLE_DEVICES='0,2'", "differ"]),
    (None, "3,1", ["ASCEND_RT_VISIBLE_DEVICES='3,1'", "ascending", "'1,3'"]),
    ("2,0", None, ["CUDA_VISIBLE_DEVICES='2,0'", "ascending"]),
])
def test_conflicting_or_unordered_visibility_is_refused_on_ascend(shim, tmp_path, cuda, ascend, needles):
    env = shim.env(CUDA_VISIBLE_DEVICES=cuda, ASCEND_RT_VISIBLE_DEVICES=ascend)
    _stopped(shim.run(["--platform", "ascend", "-c", _PROBE], env, cwd=tmp_path), "VisibilityError", *needles)


def _broken_config(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "cudashim.toml").write_text('platform = "gpu"\n')
    (app / "main.py").write_text(_PROBE.replace("; ", "\n"))
    return app


def test_broken_config_stops_under_run(shim, tmp_path):
    app = _broken_config(tmp_path)
    _stopped(shim.run([str(app / "main.py")], cwd=tmp_path), "ConfigError", str(app / "cudashim.toml"), "'gpu'")


def test_broken_config_under_bare_activation_warns_and_runs_unshimmed(shim, tmp_path):
    app = _broken_config(tmp_path)
    r = shim.python([str(app / "main.py")], shim.env(shim.bootstrap_dir), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "USER CODE RAN" in r.stdout
    assert "WARNING: the shim is OFF" in r.stderr and str(app / "cudashim.toml") in r.stderr
    active = json.loads(r.stdout.splitlines()[-1])[0]
    assert active is False


def test_bootstrap_failing_midway_undoes_what_it_did(shim, tmp_path):
    # visibility succeeds (CUDA_VISIBLE_DEVICES would be copied), then the environment step refuses:
    # under bare activation the program must see neither the copy nor the hook nor any NPU default
    env = shim.env(shim.bootstrap_dir, CUDASHIM_PLATFORM="ascend", ASCEND_RT_VISIBLE_DEVICES="0",
                   PYTORCH_NPU_ALLOC_CONF="expandable_segments:True", PYTORCH_ALLOC_CONF="max_split_size_mb:64")
    r = shim.python(["-c", _PROBE], env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "WARNING: the shim is OFF" in r.stderr and "PYTORCH_ALLOC_CONF" in r.stderr
    active, cuda, task_queue, finders = json.loads(r.stdout.splitlines()[-1])
    assert (active, cuda, task_queue) == (False, None, None)
    assert not any(m.startswith("cudashim") for m in finders)
