"""The import hook is armed at start-up and loaded on first need (cudashim.importhook.defer).

A shimmed process that never imports torch or a patch target must not pay for the patch registry
(cudashim.patches._patch); one that does must see exactly what an install at start-up gave: the patch applied as
its module loads, one shim finder on sys.meta_path, and the patches API telling the truth even when
it is asked first. Fresh interpreters: what is tested is process-wide.
"""

from __future__ import annotations

import json
import textwrap

# a library with a CUDA-only symbol, the project's replacement for it, and the config mapping them
_LIB = {
    "mylib/__init__.py": "",
    "mylib/ops.py": "def fast():\n    return 'cuda kernel'\n",
    "myrepl.py": "def fast():\n    return 'portable'\n",
    "pyproject.toml": '[tool.cudashim.patches]\n"mylib.ops:fast" = "myrepl:fast"\n',
}

_STATE = textwrap.dedent("""\
    import json, sys
    import cudashim as b  # cudashim.status()
    def state():
        return {"hook": b.status()["hook"],
                "patches_loaded": "cudashim.patches._patch" in sys.modules,
                "finders": [type(f).__name__ for f in sys.meta_path
                            if type(f).__module__.startswith("cudashim")]}
    """)


def _project(tmp_path):
    for name, text in _LIB.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _run(shim, tmp_path, body: str):
    script = _project(tmp_path) / "main.py"
    script.write_text(_STATE + textwrap.dedent(body))
    r = shim.python([str(script)], shim.env(shim.bootstrap_dir), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_first_lookup_of_a_watched_module_loads_the_hook_and_the_patch_applies(shim, tmp_path):
    got = _run(shim, tmp_path, """\
        out = {"start": state()}
        import json, csv  # not watched: the hook stays armed
        out["unwatched"] = state()
        import mylib.ops  # a module holding a config patch target
        out["after"] = state()
        out["fast"] = mylib.ops.fast()
        import cudashim.patches as p
        out["original"] = p.original("mylib.ops:fast")()
        print(json.dumps(out))
        """)
    armed = {"hook": "armed", "patches_loaded": False, "finders": ["_Finder"]}
    assert got["start"] == armed and got["unwatched"] == armed
    # loaded: the same one finder, and the lookup that woke it was patched
    assert got["after"] == {"hook": "loaded", "patches_loaded": True, "finders": ["_Finder"]}
    assert (got["fast"], got["original"]) == ("portable", "cuda kernel")


def test_using_the_patches_api_first_carries_out_the_install(shim, tmp_path):
    got = _run(shim, tmp_path, """\
        import cudashim.patches as p
        out = {"face": state()}  # the package face is data: importing it loads nothing
        out["installed"] = p.installed()
        out["after_import"] = state()
        import mylib.ops
        out["fast"] = mylib.ops.fast()
        out["status"] = [(s["target"], s["state"]) for s in p.status() if s["target"] == "mylib.ops:fast"]
        print(json.dumps(out))
        """)
    assert got["face"] == {"hook": "armed", "patches_loaded": False, "finders": ["_Finder"]}
    assert got["after_import"] == {"hook": "loaded", "patches_loaded": True, "finders": ["_Finder"]}
    assert got["installed"] is True and got["fast"] == "portable"
    assert len(got["status"]) == 1 and got["status"][0][0] == "mylib.ops:fast", got["status"]


def test_a_torch_lookup_loads_the_hook_too(shim, tmp_path):
    """torch is watched for the installer: a stand-in torch (this test does not need the real
    one) is enough to see the hook load when it is looked up, and the installer called."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    got = _run(shim, tmp_path, """\
        import cudashim._bootstrap as b
        calls = []
        b._on_torch = lambda platform, module: calls.append((platform, module.__name__))
        import torch
        print(json.dumps({"after": state(), "calls": calls}))
        """)
    assert got["after"]["hook"] == "loaded" and got["after"]["finders"] == ["_Finder"]
    assert got["calls"] == [["cpu", "torch"]]


def test_deactivate_while_armed_leaves_meta_path_as_found(shim, tmp_path):
    code = _STATE + textwrap.dedent("""\
        import cudashim
        before = list(sys.meta_path)
        cudashim.activate(platform="cpu")
        armed = state()
        cudashim.deactivate()
        out = {"armed": armed, "restored": sys.meta_path == before, "after": state()}
        cudashim.activate(platform="cpu")  # and again: a fresh armed hook
        out["again"] = state()
        print(json.dumps(out))
        """)
    r = shim.python(["-c", code], shim.env(), cwd=_project(tmp_path))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["armed"] == {"hook": "armed", "patches_loaded": False, "finders": ["_Finder"]}
    assert got["restored"] is True
    assert got["after"] == {"hook": None, "patches_loaded": False, "finders": []}
    assert got["again"]["finders"] == ["_Finder"]


def test_the_armed_hook_leaves_sys_meta_path_at_exit(shim, tmp_path):
    """After the program's atexit handlers, the armed hook takes itself off sys.meta_path (so that
    finalization frees the shim's modules the cheap way); a handler the program registered still
    runs with the hook in place."""
    got = _run(shim, tmp_path, """\
        import atexit
        seen = {}
        atexit.register(lambda: seen.setdefault("in_handler", state()["finders"]))
        atexit._run_exitfuncs()  # what the interpreter does at exit, here where we can still look
        print(json.dumps({"in_handler": seen["in_handler"], "after": state()["finders"]}))
        """)
    assert got == {"in_handler": ["_Finder"], "after": []}
