"""The ascend step through the real activation path: `python -m cudashim run --platform ascend --report`.

Same stand-in and same real transfer_to_npu.py as the contract test (see its docstring for what this
proves and what it does not); here the installer is reached the way a user reaches it — the launcher,
the bootstrap's import hook firing on `import torch` — and the migration report names what the
CUDA-written program touched, from its own lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """\
import torch
g = torch.cuda.CUDAGraph(keep_graph=True)
s = torch.cuda.Stream()
assert s.cuda_stream == s.npu_stream
g.instantiate()
with torch.cuda.graph(g):
    pass
print("ascend:", torch.cuda.is_available(), type(g).__mro__[1].__name__)
"""


def test_run_on_ascend_with_report(standin_site: Path, tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "asc.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDASHIM_", "TILELANG_"))}
    env.update({"PYTHONPATH": str(standin_site), "PYTHONWARNINGS": "ignore"})
    proc = subprocess.run([sys.executable, "-m", "cudashim", "run", "--platform", "ascend", "--report", str(out),
                           str(script)], cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ascend: True NPUGraph" in proc.stdout
    data = json.loads(out.read_text())
    assert data["platform"] == "ascend"
    apis = {a["api"]: a for a in data["apis"]}
    lines = PROGRAM.splitlines()
    for api, text in (("torch.cuda.CUDAGraph", "CUDAGraph(keep_graph=True)"),
                      ("torch.cuda.Stream", "torch.cuda.Stream()"),
                      ("torch.cuda.Stream.cuda_stream", "s.cuda_stream"),
                      ("torch.cuda.CUDAGraph.instantiate", "g.instantiate()"),
                      ("torch.cuda.graph", "torch.cuda.graph(g)")):
        line = next(n for n, ln in enumerate(lines, 1) if text in ln)
        assert apis[api]["first_call_site"] == f"{script}:{line}", api
        assert apis[api]["calls"] == 1, api
    assert apis["torch.cuda.CUDAGraph.instantiate"]["treatment"] == "emulated"
