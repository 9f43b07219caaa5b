"""Report files are written safely and one per process. Issue 16: planted symlink on the temporary,
mode 0644, argv recorded, 50 processes sharing one path, a child overwriting its parent's report,
`platform` empty, call site inside site-packages."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from ._trust import Trust, write

WAIT_STDIN = 'import sys\nsys.stdin.readline()\n'


def test_planted_symlink_at_the_temporary_is_not_followed(trust: Trust, tmp_path: Path) -> None:
    victim = write(tmp_path / "victim.txt", "precious\n")
    out = tmp_path / "r.json"
    write(tmp_path / "app.py", WAIT_STDIN)
    proc = subprocess.Popen([sys.executable, "-m", "cudashim", "run", "--report", str(out), "app.py"],
                            cwd=tmp_path, env=trust.env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the launcher execs the program: its pid is the program's; the old name was <report>.tmp<pid>
    (tmp_path / f"r.json.tmp{proc.pid}").symlink_to(victim)
    _, err = proc.communicate("go\n", timeout=120)
    assert proc.returncode == 0, err
    assert victim.read_text() == "precious\n"
    assert json.loads(out.read_text())["pid"] == proc.pid
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == [f"r.json.tmp{proc.pid}"]


def test_report_is_private_and_records_arguments_only_on_request(trust: Trust, tmp_path: Path) -> None:
    write(tmp_path / "app.py", "pass\n")
    out = tmp_path / "r.json"
    proc = trust.run(["--report", str(out), "app.py", "--token", "s3cret"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text()
    assert "s3cret" not in text
    assert json.loads(text)["argv"] == ["app.py"]  # the program, not its arguments
    env = trust.env(CUDASHIM_REPORT_ARGS="1")
    proc = trust.run(["--report", str(out), "app.py", "--token", "s3cret"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["argv"] == ["app.py", "--token", "s3cret"]


def test_platform_is_filled_in(trust: Trust, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = trust.python(["-c", "pass"], cwd=tmp_path, env=trust.bare(CUDASHIM_REPORT=str(out)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["platform"] == "cpu"


def test_fifty_processes_sharing_one_path_lose_no_report(trust: Trust, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    go = tmp_path / "go"
    ready = tmp_path / "ready"
    ready.mkdir()
    # each program says it is running (its bootstrap is done), then waits until all 50 are
    write(tmp_path / "app.py", f"import os, time\nopen(os.path.join({str(ready)!r}, str(os.getpid())), 'w').close()\n"
                               f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n")
    env = trust.bare(CUDASHIM_REPORT=str(out))
    procs = [subprocess.Popen([sys.executable, "app.py"], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
             for _ in range(50)]
    deadline = time.time() + 240
    while len(os.listdir(ready)) < len(procs) and time.time() < deadline:
        time.sleep(0.05)
    go.write_text("")
    pids = set()
    for p in procs:
        assert p.wait(timeout=300) == 0
        pids.add(p.pid)
    written = {json.loads(f.read_text())["pid"] for f in tmp_path.glob("r*.json")}
    assert written == pids  # one report per process, none overwritten
    assert out.exists()


def test_a_child_never_overwrites_its_parents_report(trust: Trust, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    child_pid = tmp_path / "child.pid"
    # the parent touches CUDA; one child (waited for) touches CUDA too; one child outlives the parent
    write(tmp_path / "app.py", f"""\
import subprocess, sys, torch
torch.cuda.is_available()
subprocess.run([sys.executable, "-c", "import torch; torch.cuda.device_count()"], check=True)
late = subprocess.Popen([sys.executable, "-c", "import os, time\\nwhile not os.path.exists({str(out)!r}): time.sleep(0.01)"])
open({str(child_pid)!r}, "w").write(str(late.pid))
""")
    proc = trust.run(["--platform", "cpu", "--report", str(out), "app.py"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    late = int(child_pid.read_text())
    deadline = time.time() + 60
    while time.time() < deadline and os.path.exists(f"/proc/{late}"):
        time.sleep(0.05)
    parent = json.loads(out.read_text())
    assert parent["pid"] != late and "torch.cuda.is_available" in {a["api"] for a in parent["apis"]}
    children = [json.loads(f.read_text()) for f in tmp_path.glob("r.pid*.json")]
    assert len(children) == 1 and "torch.cuda.device_count" in {a["api"] for a in children[0]["apis"]}
    assert tmp_path.joinpath(f"r.pid{children[0]['pid']}.json").exists()


def test_call_site_is_the_users_line_not_a_site_packages_helper(trust: Trust, tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    write(site / "helperlib.py", "import torch\ndef sync():\n    torch.cuda.synchronize()\n")
    app = write(tmp_path / "app.py", "import helperlib\nhelperlib.sync()\n")
    out = tmp_path / "r.json"
    env = trust.env()
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    proc = trust.run(["--platform", "cpu", "--report", str(out), "app.py"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    apis = {a["api"]: a for a in json.loads(out.read_text())["apis"]}
    assert apis["torch.cuda.synchronize"]["first_call_site"] == f"{app}:2"


def test_factories_are_the_devices_own_and_accelerator_calls_are_listed(trust: Trust, tmp_path: Path) -> None:
    """On cpu, torch.zeros(device='cuda') runs on the emulated device as written: no shim code wraps it, so
    the report (what the shim did) lists no factory; torch.accelerator calls are listed as the program made them."""
    app = write(tmp_path / "app.py", "import torch\ntorch.ones(3)\ntorch.zeros(2, device='cuda')\n"
                                     "torch.accelerator.device_count()\n")
    out = tmp_path / "r.json"
    proc = trust.run(["--platform", "cpu", "--report", str(out), "app.py"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    apis = {a["api"]: a for a in json.loads(out.read_text())["apis"]}
    assert not [api for api in apis if api.startswith(("torch.ones", "torch.zeros"))], apis
    assert apis["torch.accelerator.device_count"]["first_call_site"] == f"{app}:4"
