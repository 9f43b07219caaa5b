"""Every Python process a program under `cudashim run` starts is shimmed, and bootstraps exactly once.

Counted from the CUDASHIM_DEBUG=1 trace: one "bootstrap done" line per process id; the programs
report their own pids so the count is checked for each process we know started.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

_REPORT = ("import json, os, cudashim as b; "
           "print('REPORT', json.dumps([os.getpid(), os.environ.get('LOCAL_RANK'), "
           "os.environ.get('CUDA_VISIBLE_DEVICES'), b.status()]), flush=True)")


def _reports(stdout: str) -> list[list]:
    return [json.loads(line[len("REPORT "):]) for line in stdout.splitlines() if line.startswith("REPORT ")]


def test_spawn_child_and_subprocess_are_shimmed_once_each(shim, tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""\
        import multiprocessing as mp, subprocess, sys

        def child():
            {_REPORT}

        if __name__ == "__main__":
            {_REPORT}
            p = mp.get_context("spawn").Process(target=child)
            p.start(); p.join()
            subprocess.run([sys.executable, "-c", {_REPORT!r}], check=True)
            sys.exit(p.exitcode)
    """))
    r = shim.run([str(script)], shim.env(CUDASHIM_DEBUG="1"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    reports = _reports(r.stdout)
    assert len(reports) == 3  # parent, spawn child, subprocess
    counts = shim.bootstraps(r.stderr)
    for pid, _, _, status in reports:
        assert status["active"] and status["platform"] == "cpu" and status["bootstrap_runs"] == 1
        assert counts[pid] == 1, (pid, counts)
    assert set(counts.values()) == {1}  # helpers (e.g. the resource tracker) once too, never twice
    assert len({pid for pid, *_ in reports}) == 3


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is installed with torch")
def test_torchrun_workers_are_shimmed_once_and_get_their_devices(shim, tmp_path):
    worker = tmp_path / "worker.py"
    # reports go to files: torchrun owns the workers' stdout (it may filter or prefix it)
    worker.write_text(textwrap.dedent("""\
        import json, os, cudashim as b
        with open(os.path.join(os.environ["PROBE_DIR"], os.environ["LOCAL_RANK"] + ".json"), "w") as f:
            json.dump([os.getpid(), os.environ["LOCAL_RANK"], os.environ.get("CUDA_VISIBLE_DEVICES"), b.status()], f)
    """))
    # nvidia (forced): per-rank device slices are visible in CUDA_VISIBLE_DEVICES, and torchrun's own
    # `import torch` gets no installer, so this test is about propagation alone
    env = shim.env(CUDASHIM_DEBUG="1", CUDA_VISIBLE_DEVICES="0,1,2,3", CUDASHIM_DEVICES_PER_RANK="2",
                   PROBE_DIR=str(tmp_path))
    r = shim.run(["--platform", "nvidia", "torchrun", "--standalone", "--nproc_per_node=2", str(worker)],
                 env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    reports = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in ("0", "1")]
    assert [rep[1] for rep in reports] == ["0", "1"]
    assert [rep[2] for rep in reports] == ["0,1", "2,3"]
    counts = shim.bootstraps(r.stderr)
    for pid, _, _, status in reports:
        assert status["active"] and status["platform"] == "nvidia" and status["bootstrap_runs"] == 1
        assert counts[pid] == 1, (pid, counts)
    assert set(counts.values()) == {1}
    assert len(counts) >= 3  # torchrun itself too
