"""examples/serve.py (CUDA-written: torch.cuda streams, events, memory, torch.compile) on the simulated NPU."""

from __future__ import annotations

from _sim import need_wheel, run_sim


def test_serve_runs_on_the_simulated_ascend_platform():
    need_wheel()
    r = run_sim(["examples/serve.py"], timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "tokens/s" in r.stdout and "simulated" in r.stdout  # the device name says what ran
    assert "SIMULATED" in r.stderr.splitlines()[0]
