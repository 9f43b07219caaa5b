"""importhook.pause_gc: the next load of a named module runs with the cyclic garbage collector paused and
leaves it as it was, however the load ends; shimmed start-ups pause it while torch loads."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Callable

from conftest import REPO

Run = Callable[..., str]

# a module that says, while its code runs, whether the collector is on; `bad` fails half-way
MODULES = {
    "big/__init__.py": "import gc\nSEEN = gc.isenabled()\nfrom big import inner\n",
    "big/inner.py": "import gc\nSEEN = gc.isenabled()\n",
    "bad.py": "import gc\nSEEN = gc.isenabled()\nraise RuntimeError('half-way')\n",
    "plain.py": "import gc\nSEEN = gc.isenabled()\n",
}


def test_the_load_runs_paused_and_the_collector_is_back_after(shim: Run) -> None:
    shim("""
        import gc
        importhook.pause_gc(["big"])
        import big, plain
        assert big.SEEN is False and big.inner.SEEN is False  # the package and what it imports
        assert plain.SEEN is True  # a module not named: as usual
        assert gc.isenabled()
        del sys.modules["big"], sys.modules["big.inner"]
        import big
        assert big.SEEN is True  # the next load only
    """, MODULES)


def test_a_failed_load_leaves_the_collector_on(shim: Run) -> None:
    shim("""
        import gc
        importhook.pause_gc(["bad"])
        try:
            import bad
        except RuntimeError as e:
            assert str(e) == "half-way"
        else:
            raise AssertionError("the module's error was lost")
        assert gc.isenabled()
    """, MODULES)


def test_a_collector_the_program_disabled_stays_disabled(shim: Run) -> None:
    shim("""
        import gc
        gc.disable()
        importhook.pause_gc(["big"])
        import big
        assert big.SEEN is False and not gc.isenabled()
    """, MODULES)


# collections the collector starts while torch's own module code runs (a frame of torch/__init__.py on the
# stack: the shim's work before it and importlib's after it are not torch's import), and whether it is on
_COUNT = """
import gc, os, sys
inside = []
def during_torch(phase, info):
    f = sys._getframe(1) if phase == "start" else None
    while f is not None:
        if f.f_code.co_name == "<module>" and f.f_code.co_filename.endswith(os.path.join("torch", "__init__.py")):
            inside.append(info["generation"])
            return
        f = f.f_back
gc.callbacks.append(during_torch)
import torch
print(len(inside), gc.isenabled())
"""


def _count(shimmed: bool) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env["PYTHONPATH"] = str(REPO)
    if shimmed:
        cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "cpu", "-c", _COUNT]
    else:
        env["CUDASHIM_DISABLE"] = "1"
        cmd = [sys.executable, "-c", _COUNT]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()[-2:]


def test_a_shimmed_import_of_torch_runs_no_collection() -> None:
    plain, shimmed = _count(False), _count(True)
    assert int(plain[0]) > 1 and plain[1] == "True", plain  # torch's import alone starts collections
    assert shimmed == ["0", "True"], shimmed
