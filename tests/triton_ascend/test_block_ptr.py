"""Block pointers (Triton 3.2's `tl.make_block_ptr`, `tl.advance`, `boundary_check`, `padding_option`), which
triton-ascend 3.2.0 speaks and the installed Triton removed: on the simulated NPU they run in the route's
interpreter (kernels of _block_kernels.py against torch), flash-linear-attention's Ascend branch
(`chunk_simple_gla`) equals its float64 oracle, the batched executor hands such launches to the exact
interpreter with its reason, and on the cpu platform the installed Triton's own language stays as it is."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _ta import need_wheel

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "scripts" / "sim_block_ptr.py"
pytestmark = pytest.mark.slow
_BATCHED_REASON = "interpreter|batched: unsupported op tl.make_block_ptr (block pointers): exact interpreter"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "simulated"))
    try:
        from _sim import need_wheel as need_torch_npu_wheel, run_sim
    finally:
        sys.path.pop(0)
    need_torch_npu_wheel()
    need_wheel()
    report = tmp_path_factory.mktemp("bp") / "r.json"
    r = run_sim(["--report", str(report), str(SCRIPT)], {"OMP_NUM_THREADS": "1", "CUDASHIM_TRITON_ASCEND_COMPILE": "1"},
                timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["npu"] == ["ok", True]
    out["readiness"] = {k["kernel"].rpartition(":")[2]: k["compiles_for_ascend"]
                        for k in json.loads(report.read_text())["npu_readiness"]["triton_kernels"]}
    return out


def test_tiles_advance_and_boundary_checks_equal_torch(sim: dict) -> None:
    kind, tile = sim["tile_affine_rowsum"]
    assert kind == "ok", tile
    # y written tile by tile through a strided view, nothing outside the view touched; zero padding in the sums
    assert tile["y"] < 1e-6 and tile["rowsum"] < 1e-5 and tile["untouched"], tile
    assert sim["nan_pad"] == ["ok", {"inside": True, "padding_nan": True}]
    kind, err = sim["block_matmul"]  # column-major operand (order (0, 1)), K walked by tl.advance, zero padding
    assert kind == "ok" and err < 1e-4, sim["block_matmul"]


def test_refusals_of_triton_3_2s_block_pointer_semantics(sim: dict) -> None:
    kind, msg = sim["mask_with_block_ptr"]
    assert kind == "InterpreterError" and "`mask` and `other` cannot be given with a block pointer" in msg
    kind, msg = sim["boundary_check_on_pointers"]
    assert kind == "InterpreterError" and "apply only to a block pointer" in msg


def test_flash_linear_attentions_ascend_branch_equals_its_float64_oracle(sim: dict) -> None:
    if importlib.util.find_spec("fla") is None:
        pytest.skip("fla is not installed: pip install -r tests/requirements-subjects.txt")
    assert sim["fla_npu_branch"] == ["ok", True]  # fla saw the NPU, so its triton_ascend backend ran
    kind, res = sim["fla_chunk_simple_gla"]
    assert kind == "ok", res
    assert res["ok"], res
    paths = sim["paths"][1]
    assert "chunk_o_fwd_kernel" in paths  # fla's Ascend chunk_o (block pointers) is what ran


def test_batched_executor_hands_block_pointers_to_the_exact_interpreter(sim: dict) -> None:
    paths = sim["paths"][1]
    for kernel in ("tile_affine_rowsum_kernel", "nan_pad_kernel", "block_matmul_kernel"):
        assert paths[kernel] == {_BATCHED_REASON: 1}, paths


def test_cpu_keeps_the_installed_tritons_language() -> None:
    """The emulated device stands for a GPU with the installed Triton: where that Triton removed block
    pointers, a kernel using them fails there as it would on the GPU."""
    from cudashim.triton_route.block_ptr import removed_in_installed_triton

    if not removed_in_installed_triton():
        pytest.skip("the installed Triton still has block pointers: its own run on every platform")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", str(SCRIPT), "nan_pad"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    kind, msg = json.loads(r.stdout.strip().splitlines()[-1])["nan_pad"]
    assert kind == "InterpreterError" and "Block pointers have been removed" in msg


def test_the_wheels_frontend_agrees_with_the_interpreter(sim: dict) -> None:
    """The same kernels through triton-ascend's own frontend (the opt-in compile check): what runs here
    compiles for Ascend, and what the interpreter refuses the wheel refuses too, in its words."""
    verdicts = sim["readiness"]
    for kernel in ("tile_affine_rowsum_kernel", "nan_pad_kernel", "block_matmul_kernel"):
        assert verdicts[kernel] == "yes", verdicts
    if "chunk_o_fwd_kernel" in verdicts:
        assert verdicts["chunk_o_fwd_kernel"] == "yes", verdicts
    assert "mask and other arguments cannot be specified for loading block pointers" in verdicts[
        "mask_with_block_ptr_kernel"]
    assert "argument is not supported for loading a tensor of" in verdicts["boundary_check_on_pointers_kernel"]
