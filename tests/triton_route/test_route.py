"""Triton kernels run unchanged on the emulated device (cudashim.triton_route): in place, with the
interpreter's gaps closed, recorded in CUDA graphs, a graph break under torch.compile.

Each case runs in scripts/route_cases.py under `cudashim run --platform cpu`; the gap cases run once
more under stock Triton's interpreter (TRITON_INTERPRET=1, which the route leaves alone), where they
must fail: the test would not pass without the route's fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "scripts" / "route_cases.py"
GAPS = ["in_place", "float_scalar", "libdevice", "loop_index", "bf16_add", "bf16_round", "bf16_rmsnorm", "graph_replay", "compiled"]


def _run(*cases: str, interpret: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", str(SCRIPT), *cases],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def route() -> dict:
    return _run()


@pytest.fixture(scope="module")
def stock() -> dict:
    return _run(*GAPS, interpret=True)


def ok(outcomes: dict, name: str):
    kind, value = outcomes[name]
    assert kind == "ok", f"{name}: {kind}: {value}"
    return value


def test_jit_still_returns_a_jitfunction(route: dict, stock: dict) -> None:
    assert ok(route, "jit_type") == "JITFunction"


def test_user_triton_interpret_gets_stock_triton() -> None:
    assert ok(_run("jit_type", interpret=True), "jit_type") == "InterpretedFunction"


def test_driver_answers_from_the_device(route: dict) -> None:
    d = ok(route, "driver")
    assert d["device"] == "cuda:0" and d["current"] == 0
    assert "backend='cuda'" in d["target"] and "arch=80" in d["target"]  # the device's capability 8.0
    assert d["sm"] == d["torch_sm"] and d["warp"] == 32


def test_driver_answers_the_profile() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--profile", "h100-80gb",
                           str(SCRIPT), "driver"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    d = ok(json.loads(proc.stdout.strip().splitlines()[-1]), "driver")
    assert "arch=90" in d["target"] and d["sm"] == 132 == d["torch_sm"]


def test_vector_add(route: dict) -> None:
    assert ok(route, "vector_add") is True


def test_launch_reads_and_writes_in_place(route: dict, stock: dict) -> None:
    r = ok(route, "in_place")
    assert r == {"copied_bytes": 0, "written": True, "untouched": 0.0}
    assert ok(stock, "in_place")["copied_bytes"] >= 4 << 20  # stock copies the 4 MiB storage of the view


def test_float_scalar_argument(route: dict, stock: dict) -> None:
    assert ok(route, "float_scalar") is True
    assert stock["float_scalar"][0] != "ok"


def test_libdevice_functions(route: dict, stock: dict) -> None:
    assert ok(route, "libdevice") == [True, True, True, True]
    assert stock["libdevice"][0] != "ok"


def test_range_loop_index_is_a_tensor(route: dict, stock: dict) -> None:
    assert ok(route, "loop_index") is True
    assert stock["loop_index"][0] != "ok"


def test_bf16_arithmetic_in_fp32_rounded(route: dict, stock: dict) -> None:
    assert ok(route, "bf16_add") is True
    assert stock["bf16_add"] != ["ok", True]


def test_bf16_conversion_rounds_to_nearest_even(route: dict, stock: dict) -> None:
    assert ok(route, "bf16_round") is True
    assert stock["bf16_round"] != ["ok", True]


def test_bf16_rmsnorm(route: dict, stock: dict) -> None:
    r = ok(route, "bf16_rmsnorm")
    assert not r["nan"] and r["equal"], r
    assert stock["bf16_rmsnorm"][0] != "ok" or not stock["bf16_rmsnorm"][1]["equal"]


def test_autotune_nested_jit_and_reset_to_zero(route: dict) -> None:
    r = ok(route, "autotune_nested")
    assert r["equal"] is True
    assert r["chosen"] == {"BLOCK": 32}  # deterministic: the first configuration


def test_heuristics(route: dict) -> None:
    assert ok(route, "heuristics") is True


def test_graph_replay_runs_the_launch_on_current_contents(route: dict, stock: dict) -> None:
    assert ok(route, "graph_replay") == {"first": True, "second": True}
    assert stock["graph_replay"] != ["ok", {"first": True, "second": True}]


def test_torch_compile(route: dict, stock: dict) -> None:
    assert ok(route, "compiled") is True
    assert stock["compiled"][0] != "ok"


def test_torch_compile_when_dynamo_loaded_triton_itself(route: dict) -> None:
    assert ok(route, "dynamo_first") == "[5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]"


def test_cpu_tensor_refused_as_triton_does(route: dict) -> None:
    assert route["cpu_tensor"] == ["ValueError", "Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)"]


@pytest.mark.parametrize("name,words", [("warmup", ("add_kernel", "warmup()")), ("n_regs", ("add_kernel", ".n_regs")),
                                        ("inline_asm", ("asm_kernel", "inline assembly"))])
def test_what_cannot_run_fails_naming_kernel_and_patch_map(route: dict, name: str, words: tuple) -> None:
    kind, message = route[name]
    assert kind == "CapabilityError", message
    for w in words + ("tool.cudashim.patches", "triton_kernels"):
        assert w in message, message


def test_execution_seam_and_launch_check(route: dict) -> None:
    r = ok(route, "seam")
    assert r["declined_ran_interpreter"] and r["taken"]
    assert r["seen"] == [["add_kernel", "(1, 1, 1)", "['BLOCK', 'n', 'out_ptr', 'x_ptr', 'y_ptr']"]]
    assert r["paths"]["interpreter|decline: not this one"] == 1 and r["paths"]["take"] == 1


def test_report_lists_each_kernel_with_a_patch_map_line(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "--report", str(report),
                           str(SCRIPT), "vector_add", "graph_replay", "autotune_nested"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "triton: 2 kernel(s)" in proc.stderr and "recorded in CUDA graphs" in proc.stderr
    assert "autotuning takes the first configuration" in proc.stderr  # says how it chose
    kernels = {k["kernel"]: k for k in json.loads(report.read_text())["triton_kernels"]}
    assert kernels["__main__:tuned_kernel"]["launches"] == 1
    k = kernels["__main__:add_kernel"]
    assert k["kernel"] == "__main__:add_kernel"
    assert k["launches"] == 2 and k["recorded"] == 1 and k["replayed"] == 2  # 1 + 1 eager, 1 captured, 2 replays
    assert k["grids"] == {"4x1x1": 1, "1x1x1": 2}  # vector_add: cdiv(1000, 256); graph_replay: eager + captured
    assert k["time_s"] > 0 and k["paths"] == {"batched": 4}  # all instances at once (triton_route.batched)
    assert k["launched_by"] == "__main__:vector_add"
    assert k["patch_map_line"] == '"__main__:vector_add" = "your_module:vector_add"'
