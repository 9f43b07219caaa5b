"""A fresh interpreter importing the light parts of cudashim (and resolving the platform) loads no torch, no
NVML binding, no vendor package and no compiled extension of ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREES = REPO / "tests" / "fixtures" / "trees"
HEAVY = ("torch", "pynvml", "torch_npu", "tilelang", "triton", "numpy")

_PROBE = """
import json, sys
import cudashim, cudashim.hardware, cudashim.platform, cudashim.platform.capabilities, cudashim.config, cudashim.envs
steps = {"import": None}
def loaded():
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in %(heavy)r)
    ours = sorted(m for m, mod in list(sys.modules.items()) if m.split(".")[0] == "cudashim"
                  and str(getattr(mod, "__file__", "") or "").endswith((".so", ".pyd")))
    return heavy + ours
steps["import"] = loaded()
cudashim.platform.capabilities.render_markdown()
steps["resolve"] = (cudashim.platform.resolve_platform_name(cudashim.config.load_config()), loaded())[1]
plat = cudashim.PLATFORM
steps["PLATFORM"] = loaded()
print(json.dumps({"platform": plat.name, "steps": steps}))
""" % {"heavy": HEAVY}


@pytest.mark.parametrize("tree,platform", [("h200x8", None), ("cpu_only", None), ("ascend950x8", "cpu"),
                                           ("h200x8", "nvidia")])
def test_light_imports(tree, platform):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_") and k != "PYTHONPATH"}
    env["CUDASHIM_SYSROOT"] = str(TREES / tree)
    if platform:
        env["CUDASHIM_PLATFORM"] = platform
    # cwd=REPO (not PYTHONPATH) so the repo's sitecustomize trampoline does not run first
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["steps"] == {"import": [], "resolve": [], "PLATFORM": []}
    assert result["platform"] == (platform or ("nvidia" if tree == "h200x8" else "cpu"))
