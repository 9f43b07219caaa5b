"""A GAN training loop (transposed convolutions, batch norm, a depthwise convolution, backward) on the
emulated device gives exactly its CPU run's figures: every operator is the CPU's own kernel, chosen as
the CPU chooses it (one intra-op thread). The device's promise, not CUDA's: skipped under real CUDA."""

from __future__ import annotations

import json

import pytest

from emulated_run import HERE, REAL_CUDA, run_python

pytestmark = pytest.mark.skipif(REAL_CUDA, reason="the device's promise (CPU kernels), not CUDA's")


def test_gan_loop_matches_its_cpu_run() -> None:
    proc = run_python([str(HERE / "_gan_loop.py")], {"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs["cuda"]["devices"] == ["cuda"] and runs["cpu"]["devices"] == ["cpu"]
    # floats compared with == are bitwise equal here (no NaN); the digest covers every weight, batch
    # norm statistic and Adam moment of both models after the last step
    for key in ("loss_d", "loss_g", "d_x", "gen_weights", "state_sha256"):
        assert runs["cuda"][key] == runs["cpu"][key], key
