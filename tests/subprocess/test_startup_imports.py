"""The bootstrap keeps heavy standard-library modules out of every shimmed interpreter's start-up.

The trampoline runs before user code in every process started under the shim, so what it imports
is paid by every `python -c pass`, every pip and every spawned worker. Measured on a clean
interpreter (benchmarks/bench_startup.py), the modules in HEAVY cost from ~0.5 ms (importlib) to
~3 ms (typing) and more (dataclasses pulls in inspect, ast, dis, tokenize; pathlib pulls urllib.parse)
each, against a goal of < 3 ms for the whole bootstrap. None of them is needed to find no config
file, detect the platform from a few directory listings, settle the environment and install the
import hook.

The probe runs with `python -S` so that nothing imported by the environment's own .pth files (this
box's site imports typing) hides an import of ours; it imports `os` first, as `site` would, then
runs the real trampoline. What it proves: on these paths the bootstrap imports none of HEAVY.
What it does not prove: how long start-up takes (that is the benchmark's job).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "typing", "dataclasses", "inspect", "ast", "dis", "tokenize", "pathlib", "urllib.parse", "tomllib",
    "re", "enum", "ctypes", "threading", "functools", "collections", "contextlib", "importlib",
    "importlib.util", "importlib.machinery",
)

_PROBE = """
import os, sys  # json only at the end: it imports re, enum, functools...
sys.path[:0] = %(path)r
before = set(sys.modules)
import sitecustomize  # the trampoline, exactly as site would run it
import cudashim as b
new = set(sys.modules) - before
status = b.status()
extra = %(extra)r
if extra:  # positive control: the probe does see what a module imports
    before = set(sys.modules)
    __import__(extra)
    new_after_extra = sorted(set(sys.modules) - before)
else:
    new_after_extra = []
import json
print(json.dumps({"new": sorted(new), "status": status, "extra": new_after_extra}))
"""


def _probe(shim, env: dict[str, str], extra: str = "") -> dict:
    code = _PROBE % {"path": [str(shim.bootstrap_dir), str(shim.pkg_dir)], "extra": extra}
    env = dict(env)
    env.pop("PYTHONPATH", None)  # the probe puts exactly its two folders on sys.path
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, cwd=shim.empty_root)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["detected cpu", "cudashim run", "nvidia", "ascend"])
def test_bootstrap_imports_nothing_heavy(shim, case):
    extra: dict[str, str] = {}
    if case == "cudashim run":  # what the launcher sets
        extra = {"CUDASHIM_STRICT": "1", "CUDASHIM_SCRIPT_DIR": str(shim.empty_root)}
    elif case in ("nvidia", "ascend"):
        extra = {"CUDASHIM_PLATFORM": case}
    got = _probe(shim, shim.env(**extra))
    # it really ran, with no config file and the expected platform (a failed bootstrap imports little too)
    st = got["status"]
    assert st["active"] and st["bootstrap_runs"] == 1 and st["config"] is None, st
    assert st["platform"] == ("cpu" if case in ("detected cpu", "cudashim run") else case)
    assert "cudashim.config" in got["new"] and "cudashim.envs" in got["new"]
    # the hook is armed, not loaded: the patches package, its finder and its registry wait until
    # torch or a module holding a patch target is looked up (tests/subprocess/test_armed_hook.py)
    # (the packs, data, are: the bootstrap reads their module names)
    assert [m for m in got["new"] if m.startswith("cudashim.patches")] == ["cudashim.patches", "cudashim.patches.packs"]
    assert st["hook"] == "armed", st
    # no config file: its reader (tomllib, in HEAVY) stays out; detection needs the hardware package alone
    assert "cudashim.hardware.device" not in got["new"]
    # the one import hook and the platform names are what activation adds; the reset registry is not
    # (it names the start-up modules instead: tests/unit/test_state.py)
    assert {"cudashim.importhook", "cudashim.platform"} <= set(got["new"]), got["new"]
    assert "cudashim._state" not in got["new"]
    # exactly these of the shim: detection (the hardware package) only where no override names the
    # platform, visibility only on ascend
    expected = set(_START_UP)
    if case in ("nvidia", "ascend"):
        expected -= {"cudashim.hardware", "cudashim.hardware._fs"}
    if case == "ascend":
        expected.add("cudashim.visibility")
    assert sorted(m for m in got["new"] if m.startswith("cudashim")) == sorted(expected), got["new"]
    assert "cudashim.platform.contract" not in got["new"]
    assert sorted(set(got["new"]) & set(HEAVY)) == []
    # off ascend, with no rank variables set, visibility has nothing to settle: not even imported
    assert ("cudashim.visibility" in got["new"]) == (case == "ascend")
    if case in ("detected cpu", "cudashim run"):
        # detection on a machine with neither vendor's devices reads no vendor module (cheap checks
        # of /dev, ubcore and procfs names rule both out first)
        assert "cudashim.hardware" in got["new"]
        assert not set(_VENDORS) & set(got["new"])
    # the error classes load where one is raised or caught: a start-up that goes well needs none
    assert "cudashim.errors" not in got["new"]


_VENDORS = ("cudashim.hardware.ascend", "cudashim.hardware.nvidia")
# what a shimmed start-up that finds no config file loads of cudashim; the import hook's spec lookup
# and loader wrapper (cudashim.importhook._spec) wait for the first lookup of a watched module
_START_UP = ("cudashim", "cudashim._bootstrap", "cudashim._platforms", "cudashim.envs", "cudashim.config", "cudashim.platform",
             "cudashim.hardware", "cudashim.hardware._fs", "cudashim.importhook", "cudashim.patches",
             "cudashim.patches.packs")
_TREES = Path(__file__).resolve().parents[1] / "fixtures" / "trees"


def _nodes(root: Path, *names: str) -> Path:
    (root / "dev").mkdir(parents=True)
    for name in names:
        (root / "dev" / name).write_text("")
    return root


@pytest.mark.parametrize("tree,kind", [
    ("nvidia nodes", "nvidia"),  # /dev/nvidia0 + nvidiactl, nothing else
    ("davinci nodes", "ascend"),  # /dev/davinci0 + davinci_manager, nothing else
    ("h200x8", "nvidia"),  # procfs bus ids too: the /dev nodes already decide
    ("ascend910b", "ascend"),
    ("both_drivers", "ascend"),
])
def test_device_nodes_decide_without_the_vendor_modules(shim, tmp_path, tree, kind):
    """Where a /dev node of a vendor exists, detection is certain from the /dev listing: the bootstrap
    imports neither vendor module (the machines users run on, with an accelerator, pay no more
    than a laptop), and still says the right platform."""
    if tree == "nvidia nodes":
        root = _nodes(tmp_path, "nvidia0", "nvidiactl")
    elif tree == "davinci nodes":
        root = _nodes(tmp_path, "davinci0", "davinci_manager")
    else:
        root = _TREES / tree
    got = _probe(shim, shim.env(CUDASHIM_SYSROOT=str(root)))
    st = got["status"]
    assert st["active"] and st["platform"] == kind, st
    assert not set(_VENDORS) & set(got["new"])
    assert sorted(set(got["new"]) & set(HEAVY)) == []


@pytest.mark.parametrize("tree,kind,vendor", [
    ("procfs only", "nvidia", "cudashim.hardware.nvidia"),  # bus ids, no /dev/nvidiaN
    ("procfs garbage", "cpu", "cudashim.hardware.nvidia"),  # an entry that is not a bus id
    ("ascend950x8", "ascend", "cudashim.hardware.ascend"),  # ubcore entries only
])
def test_uncertain_cases_ask_the_vendor_module(shim, tmp_path, tree, kind, vendor):
    """The control: where only the vendor's parsing can tell (procfs bus ids, live ubcore entries),
    detection imports that module, and the probe sees it."""
    if tree.startswith("procfs"):
        root = _nodes(tmp_path, "nvidiactl")
        name = "0000:18:00.0" if tree == "procfs only" else "not-a-bus-id"
        (root / "proc" / "driver" / "nvidia" / "gpus" / name).mkdir(parents=True)
    else:
        root = _TREES / tree
    got = _probe(shim, shim.env(CUDASHIM_SYSROOT=str(root)))
    assert got["status"]["active"] and got["status"]["platform"] == kind, got["status"]
    assert vendor in got["new"]
    assert sorted(set(got["new"]) & set(HEAVY)) == []


def test_rank_variables_bring_visibility_on_cpu(shim):
    """With LOCAL_RANK set, the bootstrap does import visibility (it validates the value on every platform)."""
    got = _probe(shim, shim.env(LOCAL_RANK="0"))
    assert got["status"]["active"] and got["status"]["platform"] == "cpu"
    assert "cudashim.visibility" in got["new"]


def test_first_target_lookup_sets_the_patches_up(shim):
    """The deferred install is carried out when a watched module is imported: flash_attn (not
    installed here) comes back as the stand-in, and the registry has loaded."""
    got = _probe(shim, shim.env(), extra="flash_attn")
    assert "cudashim.patches._patch" in got["extra"] and "cudashim.patches._standin" in got["extra"]
    assert "cudashim.importhook._spec" in got["extra"]


def test_probe_sees_heavy_imports(shim):
    """The control: the Platform classes need enum, and the probe reports it."""
    got = _probe(shim, shim.env(), extra="cudashim.platform.contract")
    assert "enum" in got["extra"]


def test_a_config_file_is_what_brings_tomllib(shim, tmp_path):
    """tomllib (and pathlib) load when, and only when, there is a file to parse."""
    (tmp_path / "cudashim.toml").write_text('platform = "cpu"\n')
    got = _probe(shim, shim.env(CUDASHIM_CONFIG=str(tmp_path / "cudashim.toml")))
    assert got["status"]["config"] == str(tmp_path / "cudashim.toml")
    assert {"tomllib", "pathlib"} <= set(got["new"])


@pytest.mark.parametrize("value,active", [("1", False), ("true", False), (" On", False), ("0", True), ("", True)])
def test_disabled_start_up_imports_only_what_chaining_needs(shim, value, active):
    """CUDASHIM_DISABLE=1 (the documented value) makes the trampoline chain the user's sitecustomize
    and nothing else: cudashim and cudashim._bootstrap load, not even envs. Other spellings are read
    by envs as before (and switch the shim off or on alike)."""
    got = _probe(shim, shim.env(CUDASHIM_DISABLE=value))
    st = got["status"]
    assert st["active"] is active and st["bootstrap_runs"] == 1, st
    if value == "1":
        assert sorted(m for m in got["new"] if m.startswith("cudashim")) == ["cudashim", "cudashim._bootstrap"]


def test_flags_read_before_envs_default_to_off():
    """The bootstrap answers an unset flag without importing envs: that answer must be envs' default."""
    from cudashim import envs

    for name in ("CUDASHIM_DISABLE", "CUDASHIM_STRICT", "CUDASHIM_DEBUG"):
        assert envs.READ[name].default is False, name
