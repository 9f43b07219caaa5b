"""NPU graphs on the simulated NPU: the wheel's own torch_npu/npu/graphs.py over the core's graph recorder,
with the refusals torch_npu makes in its C++ (NPUGraph.cpp, Graph.cpp) in its words, and the CUDA graph
API that transfer_to_npu maps onto them."""

from __future__ import annotations

import json
import zipfile

from _sim import need_wheel, run_readiness, run_sim


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


CAPTURE = r"""
import json, torch, torch_npu
out = {}
x = torch.ones(4, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g, pool=torch.npu.graph_pool_handle()):
    out["capturing"] = torch.npu.is_current_stream_capturing()
    y = x * 2 + 1
x.fill_(3.0); g.replay(); out["npu_graph"] = y.cpu().tolist()
# the CUDA graph API, as transfer_to_npu maps it (torch.cuda.* -> torch.npu.*)
a = torch.zeros(3, device="cuda")
cg = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.graph(cg, stream=s):
    b = a.sin() + a
a.copy_(torch.tensor([0.0, 1.0, 2.0])); cg.replay()
out["cuda_graph"] = b.cpu().tolist()
out["cuda_graph_type"] = [c.__module__ + "." + c.__qualname__ for c in type(cg).__mro__[:3]]
# make_graphed_callables: forward and backward replayed
torch.manual_seed(0)
lin = torch.nn.Linear(4, 2).npu()
lin2 = torch.nn.Linear(4, 2).npu(); lin2.load_state_dict(lin.state_dict())
f = torch.npu.make_graphed_callables(lin, (torch.randn(3, 4, device="npu", requires_grad=True),))
new = torch.randn(3, 4, device="npu")
a, b = new.clone().requires_grad_(True), new.clone().requires_grad_(True)
f(a).pow(2).sum().backward()
lin2(b).pow(2).sum().backward()
out["graphed_grad_equal"] = [bool(torch.equal(lin.weight.grad.cpu(), lin2.weight.grad.cpu())),
                             bool(torch.equal(a.grad.cpu(), b.grad.cpu()))]
# a torch.compile function inside the capture: its C++ kernels replay with the graph
@torch.compile
def fused(t):
    return torch.relu(t) * 3
z = torch.full((4,), -1.0, device="npu")
fused(z)
g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2):
    w = fused(z)
z.fill_(2.0); g2.replay(); out["compiled"] = w.cpu().tolist()
out["graphs_file"] = torch_npu.npu.graphs.__file__
from torch._inductor.codegen.common import get_custom_backend_pass_for_device
key = get_custom_backend_pass_for_device("npu")  # Inductor's cache keys on it: no wrapper without the capture branch
out["cache_key"] = key.uuid().hex() if key is not None else None
from cudashim.emulated import graph_kernels
out["cache_key_cuda_pass"] = graph_kernels.cache_key_pass().uuid().hex()
print(json.dumps(out))
"""


def test_npu_graphs_capture_and_replay_on_the_simulated_npu():
    wheel = need_wheel()
    r = run_sim(["-c", CAPTURE])
    assert r.returncode == 0, r.stderr[-4000:]
    got = _last_json(r.stdout)
    assert got["capturing"] is True
    assert got["npu_graph"] == [7.0] * 4  # replay read x as it was then (3), not at capture (1)
    assert got["cuda_graph"] == [0.0, 1.8414709568023682, 2.909297466278076]
    assert got["cuda_graph_type"] == ["torch.cuda.CUDAGraph", "torch_npu.npu.graphs.NPUGraph", "torch_npu._C._NPUGraph"]
    assert got["graphed_grad_equal"] == [True, True]
    assert got["compiled"] == [6.0] * 4
    assert got["cache_key"] == got["cache_key_cuda_pass"]  # the compiled wrapper's code is in the cache key
    # the compiled kernels inside the capture are not taken for CPU fallbacks
    assert "CAUTION" not in r.stderr, r.stderr[-3000:]
    # graphs.py is the wheel's file, byte for byte
    with zipfile.ZipFile(wheel) as zf:
        real = zf.read("torch_npu/npu/graphs.py")
    assert open(got["graphs_file"], "rb").read() == real


RULES = r"""
import json, os, torch, torch_npu
out = {}
def err(f):
    try:
        f()
    except Exception as e:
        first = e.__context__ or e  # inside `with torch.npu.graph`: the refusal, then capture_end's error
        return [type(x).__name__ + ": " + str(x).splitlines()[0] for x in (first, e)]
    return None
x = torch.ones(4, device="npu")
g = torch.npu.NPUGraph()
out["default_stream"] = err(lambda: g.capture_begin())
out["replay_first"] = err(g.replay)
out["pool_first"] = err(g.pool)
s = torch.npu.Stream()
with torch.npu.stream(s):
    out["mode"] = err(lambda: g.capture_begin(capture_error_mode="strict"))
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    y = x + 1
def again():
    with torch.npu.graph(g):
        x + 1
out["twice"] = err(again)
def item():
    with torch.npu.graph(torch.npu.NPUGraph()):
        (x + 1).sum().item()
out["item"] = err(item)
def sync():
    with torch.npu.graph(torch.npu.NPUGraph()):
        torch.npu.synchronize()
out["sync"] = err(sync)
def other_stream():
    h = torch.npu.NPUGraph()
    with torch.npu.stream(torch.npu.Stream()):
        h.capture_begin()
        x + 1
    h.capture_end()
out["end_stream"] = err(other_stream)
print(json.dumps(out))
"""


def test_npu_capture_rules_are_torch_npus():
    need_wheel()
    r = run_sim(["-c", RULES])
    assert r.returncode == 0, r.stderr[-4000:]
    got = {k: v[0] if v[0] == v[1] else v for k, v in _last_json(r.stdout).items()}
    # NPUGraph::capture_begin (torch_npu/csrc/core/npu/NPUGraph.cpp)
    assert got["default_stream"] == ("RuntimeError: NPU graphs must be captured on a non-default stream. (However, "
                                     "after capture, it's ok to replay them on the default stream.)")
    assert got["twice"] == ("RuntimeError: This NPUGraph instance already owns a captured graph. To capture a new "
                            "graph, create a new instance.")
    assert got["replay_first"] == "RuntimeError: Called NPUGraph::replay without a preceding successful capture."
    assert got["pool_first"] == "RuntimeError: Called NPUGraph::pool() without a preceding successful capture."
    assert got["end_stream"] == "RuntimeError: Capture must end on the same stream it began on."
    # the _NPUGraph binding (torch_npu/csrc/npu/Graph.cpp)
    assert got["mode"] == ("RuntimeError: Unknown capture error mode. Expected `global`, `thread_local`, or "
                           "`relaxed`, got strict")
    # synchronising calls: refused (CANN's refusal, raised as a RuntimeError through NPU_CHECK_ERROR), never CUDA's words
    for key, call in (("item", "item"), ("sync", "torch.npu.synchronize() (aclrtSynchronizeDevice)")):
        refusal, at_end = got[key] if key == "sync" else (got[key], None)
        assert refusal == (f"RuntimeError: NPU function error: {call}: not permitted while a stream is being captured "
                           "into an NPU graph (CANN's stream capture refuses it; the simulator does not reproduce "
                           "CANN's error code)"), refusal
        if key == "item":  # refused on the capturing stream: the capture goes on and ends without error
            continue
        assert at_end == ("RuntimeError: NPU function error: aclmdlRICaptureEnd: the capture was invalidated by an "
                          f"earlier refusal ({call})"), at_end


def test_task_queue_enable_2_refuses_capture():
    """`cudashim run` owns TASK_QUEUE_ENABLE=0 on ascend (envs.py); a program that sets 2 itself meets
    NPUGraph::capture_begin's refusal, unless ASCEND_LAUNCH_BLOCKING=1 (GetTaskQueueEnable answers 0)."""
    need_wheel()
    code = ("import os, torch, torch_npu\nos.environ['TASK_QUEUE_ENABLE'] = '2'\ns = torch.npu.Stream()\n"
            "with torch.npu.stream(s):\n    torch.npu.NPUGraph().capture_begin()\n")
    r = run_sim(["-c", code])
    assert r.returncode != 0
    assert ("RuntimeError: Do not support TASK_QUEUE_ENABLE = 2 during NPU graph capture, please export "
            "TASK_QUEUE_ENABLE=1/0.") in r.stderr
    assert "ERR00007 PTA feature not supported" in r.stderr
    r = run_sim(["-c", code], {"ASCEND_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0, r.stderr[-3000:]


FIA = r"""
import json, torch, torch_npu
torch.manual_seed(0)
b, h, d, bs = 2, 2, 16, 16
q = torch.randn(b, 1, h, d, dtype=torch.float16, device="npu")
k = torch.randn(4, bs, h * d, dtype=torch.float16, device="npu")
v = torch.randn(4, bs, h * d, dtype=torch.float16, device="npu")
table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32, device="npu")
kw = dict(num_heads=h, num_key_value_heads=h, scale=0.25, input_layout="BSND", block_table=table, block_size=bs,
          actual_seq_lengths_kv=[20, 9])
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    out, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, **kw)
q.copy_(torch.randn(b, 1, h, d, dtype=torch.float16))
g.replay()
want, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, **kw)
print(json.dumps({"equal": bool(torch.equal(out.cpu(), want.cpu()))}))
"""


def test_an_npu_operator_is_one_task_of_the_graph():
    """The simulated torch_npu operators are recorded as one task: a replay recomputes them on the
    inputs' new contents (the eager call on the same inputs is the oracle)."""
    need_wheel()
    r = run_sim(["-c", FIA])
    assert r.returncode == 0, r.stderr[-4000:]
    assert _last_json(r.stdout) == {"equal": True}


REFUSED = r"""
import torch, torch_npu
x = torch.ones(4, device="npu")
for _ in range(2):
    try:
        with torch.npu.graph(torch.npu.NPUGraph()):
            (x + 1).sum().item()
    except RuntimeError:
        pass
"""


def test_readiness_report_lists_capture_refusals(tmp_path):
    _, r, ready = run_readiness(tmp_path, REFUSED)
    refusals = ready["graph_capture_refusals"]
    assert len(refusals) == 1, refusals
    assert refusals[0]["calls"] == 2
    assert refusals[0]["first_call_site"].endswith("prog.py:7"), refusals
    assert refusals[0]["refusal"].startswith("NPU function error: ")
    assert "graph-capture refusal" in r.stderr and "prog.py:7" in r.stderr


REFUSED_IN_PYTHON = r"""
import torch, torch_npu
g = torch.npu.NPUGraph()
try:
    g.capture_begin()
except RuntimeError:
    pass
"""


def test_readiness_report_counts_a_refusal_raised_in_python(tmp_path):
    """NPUGraph.cpp's checks before capture are made in Python (emulated/npu/graphs.py), not by the core:
    the report counts them too (capture on the default stream)."""
    _, r, ready = run_readiness(tmp_path, REFUSED_IN_PYTHON)
    refusals = ready["graph_capture_refusals"]
    assert [x["refusal"][:44] for x in refusals] == ["NPU graphs must be captured on a non-default"], refusals
    assert refusals[0]["calls"] == 1
    assert refusals[0]["first_call_site"].endswith("prog.py:5"), refusals
