"""The simulated NPU's operator table: scripts/npu_op_table.py reads op-plugin's version ranges as op-plugin's
own generator does, and the committed table is the 2.13.0 wheel's list of NPU kernels."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "cudashim" / "emulated" / "npu" / "releases" / "2.13.0" / "torch_npu_ops.json"


def _script():
    spec = importlib.util.spec_from_file_location("npu_op_table", ROOT / "scripts" / "npu_op_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PLUGIN_YAML = """
all_version: [v2.1, v2.2, v2.3, v2.4, v2.5]
official:
  - func: kept(Tensor self) -> Tensor
    acl_op: all_version
  - func: ended(Tensor self) -> Tensor
    acl_op: [v2.1, v2.3]
  - func: recent.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
    op_api: [ v2.3, newest ]
  - func: listed(Tensor self) -> Tensor
    op_api: v2.1, v2.2
  - func: gap(Tensor self) -> Tensor
    acl_op: v2.1, v2.2
    op_api: [v2.4, newest]
  - func: sparse_only(Tensor self) -> Tensor
    sparse: all_version
custom:
  - func: npu_thing(Tensor self) -> Tensor
    op_api: all_version
"""


def test_version_ranges_select_the_operators_of_one_version():
    ops, sparse, _ = _script().op_plugin_ops(PLUGIN_YAML, "v2.4")
    assert ops == {"kept": "2.1", "recent.out": "2.3", "gap": "2.4"}  # since: the unbroken run ending at v2.4
    assert sparse == ["sparse_only"]
    with pytest.raises(SystemExit, match="v2.9 is not in op-plugin's all_version"):
        _script().op_plugin_ops(PLUGIN_YAML, "v2.9")


def test_the_committed_table_names_its_sources_and_is_the_wheels_list():
    table = json.loads(TABLE.read_text())
    assert table["torch_npu"] == "2.13.0"
    assert {s["repo"] for s in table["sources"]} == {"Ascend/pytorch", "Ascend/op-plugin"}
    assert all(len(s["commit"]) == 40 for s in table["sources"])
    wheels = sorted((Path.home() / ".cache" / "cudashim" / "wheels").glob("torch_npu-2.13.0-*.whl"))
    if not wheels:
        pytest.skip("the torch-npu 2.13.0 wheel is not in the cache (bash scripts/install fetches it)")
    theirs = _script().wheel_ops(str(wheels[0]))
    assert set(table["ops"]) | set(table["sparse"]) == {n for n in theirs if not n.startswith("npu_")}


def _rules_script():
    spec = importlib.util.spec_from_file_location("npu_dtype_rules", ROOT / "scripts" / "npu_dtype_rules.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DOC = """### torch.logaddexp

**限制与说明**： 不支持double数据类型

</div>

### torch.mm

**限制与说明**：

- <term>Ascend 950DT</term>：不支持fp64，complex64，complex128
- `input`仅支持fp16，fp32，fp64

</div>

### <code><i>class</i></code> torch.nn.Linear

**限制与说明**： `input`仅支持fp32
"""


def test_dtype_limits_are_read_for_a_910b_and_classes_are_skipped():
    rules = {api: _rules_script().rule(lines) for api, lines in _rules_script().sections(DOC)}
    assert rules["torch.logaddexp"][:2] == ("*", ["float64"])
    arg, refused, _ = rules["torch.mm"]  # the 950DT line is another chip's
    assert arg == "input" and "float64" not in refused and {"bfloat16", "complex64", "int32"} <= set(refused)
    assert "torch.nn.Linear" not in rules
