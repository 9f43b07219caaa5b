"""Fetch the torch-npu 2.13.0 wheel (cached) and build the recorded torch_npu stand-in around its real files.

Real, copied verbatim from the wheel: torch_npu/contrib/transfer_to_npu.py and apis_config.json, the
NPUGraph and graph classes of torch_npu/npu/graphs.py, _apply_patches of
torch_npu/_init/patches/monkey_patches.py, and torch_npu.npu's __all__. Everything native is the
recorded stand-in under tests/ascend/standin/. Nothing is installed: the stand-in lives in a temporary
folder put first on sys.path of a fresh interpreter.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from cudashim.emulated.npu.site import WHEEL_SPEC, fetch_wheel, wheel_cache

__all__ = ["WHEEL_SPEC", "cache_dir", "fetch_wheel", "build_standin", "REAL_FILES", "result", "alone_answers"]

STANDIN = Path(__file__).resolve().parent / "standin"
REAL_FILES = ("torch_npu/contrib/transfer_to_npu.py", "torch_npu/contrib/apis_config.json")
cache_dir = wheel_cache  # the simulated NPU's cache: one download serves both


def _segments(source: str, names: set[str]) -> list[str]:
    tree = ast.parse(source)
    out = [ast.get_source_segment(source, node) for node in tree.body
           if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in names]
    found = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))} & names
    if found != names:
        raise LookupError(f"the wheel no longer defines {sorted(names - found)}; update tests/ascend/_wheel.py")
    return [s for s in out if s]


def _all_of(source: str) -> list[str]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise LookupError("torch_npu/npu/__init__.py has no literal __all__")


def build_standin(wheel: Path, dest: Path) -> Path:
    """The folder to put first on sys.path: the recorded torch_npu with the wheel's real files in it."""
    site = dest / "site"
    shutil.copytree(STANDIN, site, ignore=shutil.ignore_patterns("__pycache__"))
    pkg = site / "torch_npu"
    with zipfile.ZipFile(wheel) as zf:
        for member in REAL_FILES:
            (site / member).write_bytes(zf.read(member))
        graphs = zf.read("torch_npu/npu/graphs.py").decode()
        monkey = zf.read("torch_npu/_init/patches/monkey_patches.py").decode()
        npu_init = zf.read("torch_npu/npu/__init__.py").decode()
    header = (pkg / "npu" / "_graphs_header.py").read_text()
    (pkg / "npu" / "graphs.py").write_text(
        header + "\n\n# ---- verbatim from the wheel ----\n\n" + "\n\n\n".join(_segments(graphs, {"NPUGraph", "graph"})) + "\n")
    header = (pkg / "_init" / "patches" / "_monkey_header.py").read_text()
    (pkg / "_init" / "patches" / "monkey_patches.py").write_text(
        header + "\n\n# ---- verbatim from the wheel ----\n\n" + "\n\n".join(_segments(monkey, {"_apply_patches"})) + "\n")
    (pkg / "npu" / "_real_all.py").write_text(f"NAMES = {_all_of(npu_init)!r}\n")
    return site


def result(r: subprocess.CompletedProcess) -> dict[str, Any]:
    """The last `RESULT {json}` line a child printed (it must have exited 0)."""
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def alone_answers(program: str, timeout: int, unset: tuple[str, ...] = ()) -> dict[str, Any]:
    """PROGRAM run by the simulated torch_npu alone (the wheel's package over the simulated _C, no shim) in
    a fresh interpreter on one thread, without the variables in UNSET; its RESULT line. Skips the test
    where the wheel cannot be fetched."""
    import pytest

    from cudashim.emulated.npu.site import alone_env

    if fetch_wheel()[0] is None:
        pytest.skip("the simulated torch_npu is assembled from the torch-npu wheel")
    env = alone_env(Path(__file__).resolve().parents[2])
    env["OMP_NUM_THREADS"] = "1"
    for name in unset:
        env.pop(name, None)
    return result(subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True,
                                 timeout=timeout))
