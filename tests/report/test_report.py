"""The migration report: off by default, counts and first user call sites, one file per rank."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from cudashim import _state, report

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch):
    for name in ("CUDASHIM_REPORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    report._reset()
    yield
    report._reset()


def _on(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setenv("CUDASHIM_REPORT", str(path))
    report._reset()


def test_off_by_default_records_and_writes_nothing(tmp_path: Path) -> None:
    assert report.enabled() is False
    report.record("torch.cuda.synchronize", "aliased")
    assert report.entries() == {}
    assert report.write() is None
    assert list(tmp_path.iterdir()) == []


def test_wrap_counts_calls_and_keeps_the_first_user_call_site(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    f = report.wrap("torch.cuda.synchronize", "aliased", lambda x=1: x * 2)
    first_line = inspect.currentframe().f_lineno + 1
    assert f(3) == 6
    for _ in range(4):
        f()
    e = report.entries()["torch.cuda.synchronize"]
    assert e["calls"] == 5
    assert e["treatment"] == "aliased"
    assert e["first_call_site"] == f"{__file__}:{first_line}"


def test_call_site_skips_torch_frames(monkeypatch, tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils._pytree import tree_map

    _on(monkeypatch, tmp_path / "r.json")
    f = report.wrap("torch.cuda.current_device", "aliased", lambda x: x)
    line = inspect.currentframe().f_lineno + 1
    tree_map(f, [1, 2])  # f is called from inside torch: the site is still this line
    assert report.entries()["torch.cuda.current_device"]["first_call_site"] == f"{__file__}:{line}"
    assert torch is not None


def test_wrapped_class_keeps_isinstance_and_subclassing(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")

    class Stream:
        def __init__(self, priority: int = 0) -> None:
            self.priority = priority

    S = report.wrap("torch.cuda.Stream", "emulated", Stream)
    s = S(priority=2)
    assert type(s) is Stream and s.priority == 2
    assert isinstance(Stream(), S) and issubclass(Stream, S)

    class Mine(S):  # a user's subclass of the aliased class is built normally, uncounted
        pass

    assert type(Mine()) is Mine and isinstance(Mine(), Stream)
    assert report.entries()["torch.cuda.Stream"]["calls"] == 1


def test_unknown_treatment_is_refused(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    with pytest.raises(ValueError, match="faked"):
        report.record("torch.cuda.x", "faked")


def test_write_json_and_stderr_table(monkeypatch, tmp_path, capsys) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    fake = types.ModuleType("cudashim.patches._patch")
    fake.status = lambda: [{"target": "flash_attn:flash_attn_func", "replacement": "x:y", "source": "built-in:flash_attn", "state": "stood-in"}]
    monkeypatch.setitem(sys.modules, "cudashim.patches._patch", fake)
    report.record("torch.cuda.CUDAGraph", "unsupported")
    report.wrap("torch.cuda.empty_cache", "emulated", lambda: None)()
    report.wrap("torch.cuda.ipc_collect", "emulated", lambda: None)  # bound, never called
    written = report.write()
    assert written == str(tmp_path / "r.json")
    data = json.loads(Path(written).read_text())
    assert {a["api"]: (a["treatment"], a["calls"]) for a in data["apis"]} == {
        "torch.cuda.CUDAGraph": ("unsupported", 1),
        "torch.cuda.empty_cache": ("emulated", 1),
    }
    assert data["summary"]["unsupported"] == 1 and data["summary"]["emulated"] == 1
    assert data["bound"] == 3  # the untouched alias is counted, not listed
    assert data["patches"][0]["state"] == "stood-in"
    err = capsys.readouterr().err
    assert "torch.cuda.empty_cache" in err and str(tmp_path / "r.json") in err


def test_one_file_per_rank(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert report.report_path() == str(tmp_path / "r.rank1.json")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert report.report_path() == str(tmp_path / "r.json")


def test_reset_forgets_everything(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    report.record("torch.cuda.synchronize", "aliased")
    _state.reset()
    monkeypatch.delenv("CUDASHIM_REPORT")
    assert report.entries() == {} and report.enabled() is False


def test_written_at_exit_in_a_fresh_interpreter(tmp_path) -> None:
    out = tmp_path / "exit.json"
    code = (
        "from cudashim import report\n"
        "f = report.wrap('torch.cuda.synchronize', 'aliased', lambda: None)\n"
        "f(); f()\n"
    )
    # the repo's sitecustomize trampoline is on that path: CUDASHIM_DISABLE keeps the bootstrap out of it
    env = {**os.environ, "CUDASHIM_REPORT": str(out), "PYTHONPATH": str(REPO), "CUDASHIM_DISABLE": "1"}
    env.pop("WORLD_SIZE", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["apis"] == [{"api": "torch.cuda.synchronize", "treatment": "aliased", "calls": 2, "first_call_site": "<string>:3"}]
    assert "cudashim report" in proc.stderr


def test_launcher_of_ranks_leaves_the_report_to_them(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    report.record("torch.cuda.device_count", "emulated")  # torchrun's agent probes this itself
    assert report.write() == str(tmp_path / "r.json")  # no ranks ran: this process is the program
    (tmp_path / "r.json").unlink()
    (tmp_path / "r.rank0.json").write_text("{}")  # a worker of this run finished first
    assert report.write() is None
    assert not (tmp_path / "r.json").exists()


def test_calls_from_inside_the_shim_are_not_the_programs(monkeypatch, tmp_path) -> None:
    _on(monkeypatch, tmp_path / "r.json")
    f = report.wrap("torch.cuda.current_stream", "emulated", lambda: 1)
    # compiled as if it lived in cudashim/: how a stand-in calling an aliased API looks to the report
    shim_file = str(Path(report.__file__).with_name("_fake_standin.py"))
    exec(compile("def call_from_shim(f):\n    return f()\n", shim_file, "exec"), ns := {})
    ns["call_from_shim"](f)
    assert report.entries()["torch.cuda.current_stream"]["calls"] == 0
    f()
    assert report.entries()["torch.cuda.current_stream"]["calls"] == 1


def test_spawned_helper_writes_its_own_file_only_when_it_touched_something(tmp_path) -> None:
    code = (
        "import multiprocessing as mp\n"
        "from cudashim import report\n"
        "def touch():\n"
        "    report.wrap('torch.cuda.synchronize', 'aliased', lambda: None)()\n"
        "def idle():\n"
        "    report.enabled()\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('spawn')\n"
        "    for target in (touch, idle):\n"
        "        p = ctx.Process(target=target); p.start(); p.join()\n"
        "    report.record('torch.cuda.is_available', 'aliased')\n"
    )
    script = tmp_path / "prog.py"
    script.write_text(code)
    env = {**os.environ, "CUDASHIM_REPORT": str(tmp_path / "r.json"), "PYTHONPATH": str(REPO), "CUDASHIM_DISABLE": "1"}
    for name in ("RANK", "WORLD_SIZE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in tmp_path.glob("r*.json"))
    assert len(files) == 2 and "r.json" in files, files  # the parent and the one child that touched an API
    child = next(f for f in files if f != "r.json")
    assert child.startswith("r.pid") and json.loads((tmp_path / child).read_text())["apis"][0]["calls"] == 1
