"""The conformance runner of torch_npu's own tests (verification/conformance_torch_npu.py): which files
its rule selects, how it classes a failure, and that the docs carry the figures it last wrote."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _runner():
    spec = importlib.util.spec_from_file_location("conformance_torch_npu", ROOT / "verification" / "conformance_torch_npu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_sample_is_every_file_of_the_named_folders_less_the_excluded(tmp_path):
    run = _runner()
    made = []
    for folder in run.FOLDERS:
        for name in ("test_a.py", "sub/test_b.py", "helper.py"):
            (tmp_path / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / folder / name).write_text("")
            if name != "helper.py":
                made.append(f"{folder}/{name}")
    excluded = next(iter(run.EXCLUDED))
    (tmp_path / excluded).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / excluded).write_text("")
    got = run.sample(tmp_path)
    assert set(made) | set(run.TOP_FILES) == set(got)
    assert excluded not in got and got == sorted(got)


def test_failures_are_classed_by_who_answers_for_them():
    run = _runner()
    assert run.classify("CannRequired: torch_npu.npu_iou: the NPU kernel ... ERR00007 PTA feature not supported") \
        == "needs CANN"
    assert run.classify("ModuleNotFoundError: No module named 'torchvision'") == "environment"
    assert run.classify("ImportError: cannot import name 'skipIfMps' from 'torch.testing._internal.common_utils'") \
        == "environment"
    # the simulated torch_npu's own modules missing is the simulator's, not the host's
    assert run.classify("ModuleNotFoundError: No module named 'torch_npu._inductor'") == "simulator"
    assert run.classify("AssertionError: 512 not less than or equal to 1e-05") == "simulator"
    # transfer_to_npu hands back the function torch.jit.script was given, on an NPU as here
    assert run.classify("    graph = torch.jit.script(decomp_fn).graph\n"
                        "E   AttributeError: 'function' object has no attribute 'graph'") == "transfer_to_npu"
    assert run.classify("AttributeError: 'function' object has no attribute 'graph'") == "simulator"
    assert run.classify("    get_gpu_type.cache_clear()\nE   AttributeError: 'function' object has no attribute "
                        "'cache_clear'") == "transfer_to_npu"
    assert run.classify("AssertionError: OutOfMemoryError not raised") == "simulator"  # not the host's MemoryError
    assert run.classify("RuntimeError: Failed to build stub: ['sh', '/x/third_party/acl/libs/build_stub.sh']") \
        == "needs CANN"


def test_the_docs_carry_the_figures_the_runner_last_wrote():
    run = _runner()
    data = json.loads(run.OUT.read_text())
    text = run.DOC.read_text()
    begin, end = "<!-- conformance_torch_npu:begin -->", "<!-- conformance_torch_npu:end -->"
    block = text[text.index(begin):text.index(end)]
    assert run.docs_block(data) in block, "run `python verification/conformance_torch_npu.py --write-docs`"


def test_a_run_cut_short_is_rebuilt_from_what_it_printed():
    run = _runner()
    log = "\n".join([
        "shim  test/npu/test_x.py: 3 passed, 1 simulator, 1 CANN, 0 env (12.5 s)",
        "    simulator: test_x.T.test_a: AssertionError: 1 != 2: off by one",
        "        test_x.py:10: AssertionError",
        "    needs CANN: test_x.T.test_b: CannRequired: torch_npu.npu_iou ... ERR00007",
        "shim  test/nn/test_y.py: 2 passed, 0 simulator, 0 CANN, 0 env (12.5 s)",
        "shim {'passed': 5, 'simulator': 1, 'needs CANN': 1, 'environment': 0, 'skipped': 4, 'conformance': 0.8333}",
    ])
    modes = run.modes_from_log(log)
    assert list(modes) == ["shim"]
    files = modes["shim"]["files"]
    assert files["test/npu/test_x.py"]["failures"] == [
        {"test": "test_x.T.test_a", "class": "simulator", "reason": "AssertionError: 1 != 2: off by one"},
        {"test": "test_x.T.test_b", "class": "needs CANN", "reason": "CannRequired: torch_npu.npu_iou ... ERR00007"}]
    assert modes["shim"]["total"] == {"passed": 5, "simulator": 1, "needs CANN": 1, "environment": 0,
                                      "transfer_to_npu": 0, "skipped": 4, "conformance": 0.8333}


def test_a_file_run_again_after_a_fix_replaces_its_earlier_result_only(tmp_path):
    run = _runner()
    whole = tmp_path / "whole.log"
    whole.write_text("\n".join([
        "alone test/npu/test_x.py: 3 passed, 1 simulator, 0 CANN, 0 env, 2 skipped (9.0 s)",
        "    simulator: test_x.T.test_a: AssertionError: 1 != 2",
        "alone test/nn/test_y.py: 4 passed, 0 simulator, 0 CANN, 0 env, 1 skipped (9.0 s)",
    ]))
    again = tmp_path / "again.log"
    again.write_text("alone test/npu/test_x.py: 4 passed, 0 simulator, 0 CANN, 0 env, 2 skipped (9.0 s)\n")
    out = tmp_path / "out.json"
    run.combine([whole, again], out)
    got = json.loads(out.read_text())["modes"]["alone"]
    assert set(got["files"]) == {"test/npu/test_x.py", "test/nn/test_y.py"}
    assert got["files"]["test/npu/test_x.py"]["failures"] == []
    assert got["total"] == {"passed": 8, "simulator": 0, "needs CANN": 0, "environment": 0, "transfer_to_npu": 0,
                            "skipped": 3, "conformance": 1.0}
