"""The migration report end to end: `python -m cudashim run --report` on cpu, single process and torchrun.

Fresh interpreters all the way (the launcher execs the program with the bootstrap on PYTHONPATH).
Expected call sites are found by searching the program's text, not computed by the shim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello_cuda.py"
SERVE = REPO / "examples" / "serve.py"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    for name in ("PYTHONPATH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    return env


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", *args], cwd=str(REPO),
                          env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def _line_of(path: Path, text: str) -> int:
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return n
    raise AssertionError(f"{text!r} not in {path}")


def _apis(path: Path) -> dict[str, dict]:
    return {a["api"]: a for a in json.loads(path.read_text())["apis"]}


def test_run_report_lists_aliased_apis_with_counts_and_sites(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = _run("--report", str(out), str(HELLO))
    data = json.loads(out.read_text())
    assert data["platform"] == "cpu"
    apis = _apis(out)
    sync = apis["torch.cuda.synchronize"]
    assert sync["calls"] == 1 and sync["treatment"] in ("aliased", "emulated")
    assert sync["first_call_site"] == f"{HELLO}:{_line_of(HELLO, 'torch.cuda.synchronize()')}"
    avail = apis["torch.cuda.is_available"]
    assert avail["first_call_site"] == f"{HELLO}:{_line_of(HELLO, 'torch.cuda.is_available()')}"
    # every listed API was touched, and from the user's file (never from inside cudashim or torch)
    assert all(a["calls"] > 0 for a in apis.values())
    assert all(a["first_call_site"].startswith(str(HELLO)) for a in apis.values())
    assert "cudashim report (cpu)" in proc.stderr and str(out) in proc.stderr


def test_no_report_without_the_flag(tmp_path: Path) -> None:
    proc = _run(str(HELLO))
    assert "cudashim report" not in proc.stderr


@pytest.mark.skipif(not SERVE.exists(), reason="examples/serve.py (cpu-alias owner) is not in the tree yet")
def test_serve_report(tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    _run("--report", str(out), str(SERVE))
    apis = _apis(out)
    aliased = [a for a in apis.values() if a["treatment"] == "aliased"]
    assert aliased, apis
    assert any(a["first_call_site"].startswith(str(SERVE)) for a in apis.values())


DDP = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
t = torch.ones(4, device="cuda") * (dist.get_rank() + 1)
dist.all_reduce(t)
torch.cuda.synchronize()
assert t.tolist() == [3.0] * 4
dist.destroy_process_group()
"""


def test_torchrun_two_ranks_two_files(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    out = tmp_path / "r.json"
    _run("--report", str(out), "torchrun", "--nproc-per-node", "2", "--standalone", str(script))
    written = sorted(p.name for p in tmp_path.glob("r*.json"))
    assert written == ["r.rank0.json", "r.rank1.json"]
    for rank in (0, 1):
        data = json.loads((tmp_path / f"r.rank{rank}.json").read_text())
        assert data["rank"] == rank and data["world_size"] == 2
        apis = {a["api"]: a for a in data["apis"]}
        assert apis["torch.cuda.set_device"]["first_call_site"] == f"{script}:6"
        assert apis["torch.cuda.synchronize"]["calls"] == 1
