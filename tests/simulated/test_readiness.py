"""The Ascend readiness report of a run on the simulated NPU: each aten operator and dtype the program ran,
with torch_npu 2.13.0's status for it, its count and the first call site in the user's code."""

from __future__ import annotations


from _sim import need_wheel, run_readiness, run_sim

PROGRAM = """import torch
x = torch.tensor([[1., 2., 2., 3.], [4., 4., 5., 5.]]).cuda()
for _ in range(2):
    m = torch.mode(x, dim=1)
y = x @ x.T
d = torch.logaddexp(x.double(), x.double())
print(m.values.cpu().tolist())
with torch.inference_mode():
    z = torch.nn.functional.linear(x, x)
"""


def test_the_report_lists_each_operator_with_its_npu_status_count_and_call_site(tmp_path):
    prog, r, ready = run_readiness(tmp_path, PROGRAM)
    ops = {(o["op"], o["dtypes"]): o for o in ready["ops"]}
    mode = ops[("aten::mode", "float32")]
    assert (mode["status"], mode["calls"], mode["first_call_site"]) == ("fallback", 2, f"{prog}:4")
    mm = ops[("aten::mm", "float32")]
    assert (mm["status"], mm["native_since"], mm["first_call_site"]) == ("native", "2.1", f"{prog}:5")
    assert ops[("aten::permute", "float32")]["status"] == "composite"  # x.T: no NPU kernel, its composite runs
    # inference mode hands linear over whole; torch_npu has no kernel for it: the NPU runs its parts
    assert ("aten::linear", "float32") not in ops and ops[("aten::matmul", "float32")]["first_call_site"] == f"{prog}:9"
    # torch_npu's documentation of torch.logaddexp: "不支持double数据类型" (no float64)
    rule = ops[("aten::logaddexp", "float64")]["dtype_rule"]
    assert rule["api"] == "torch.logaddexp" and rule["refused"] == ["float64"]
    assert rule["source"].endswith("docs/zh/api/native_api/pytorch_2-13-0/torch.md")
    assert ready["sources"][0]["commit"] and ready["summary"]["fallback"] == 1
    summary = [line for line in r.stderr.splitlines() if line.startswith("cudashim ascend readiness")]
    assert len(summary) == 1
    assert "1 CPU fallback" in summary[0] and f"aten::mode [float32] fallback x2 at {prog}:4" in summary[0]
    assert "1 outside the documented dtypes" in summary[0]


def test_no_report_no_readiness_section(tmp_path):
    need_wheel()
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    r = run_sim([str(prog)])
    assert r.returncode == 0, r.stderr[-4000:]
    assert "cudashim ascend readiness" not in r.stderr
