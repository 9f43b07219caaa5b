"""When the native core cannot be built or loaded, activation on cpu stops at `import torch` with
EmulatedBuildError naming the fix, instead of running the program without its device."""

from __future__ import annotations

import os
import sysconfig
import types
from pathlib import Path

import pytest

from emulated_run import REAL_CUDA, run_python


def test_unbuildable_core_stops_activation(tmp_path: Path) -> None:
    if REAL_CUDA:
        pytest.skip("the emulated device is not used where CUDA is real")
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a build folder under a file cannot be created
    proc = run_python(["-c", "import torch; print('ran without its device')"],
                      {"CUDASHIM_BUILD_DIR": str(blocker / "build")}, timeout=300)
    assert proc.returncode != 0 and "ran without its device" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert "EmulatedBuildError" in last and "CUDASHIM_BUILD_DIR" in last and "python -m cudashim.emulated" in last


def test_different_sources_never_share_a_build_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two checkouts (or two versions of csrc/) building at once must not link each other's objects
    into a library cached under the wrong hash: each set of sources gets its own build folder."""
    pytest.importorskip("torch")
    from cudashim.emulated import _build

    folders: list[Path] = []

    def fake_compile(where: Path, verbose: bool) -> object:
        folders.append(where)
        (where).mkdir(parents=True, exist_ok=True)
        (where / f"{_build._NAME}.so").write_bytes(next(Path(sysconfig.get_config_var("DESTSHARED")).glob("*.so")).read_bytes())
        return types.SimpleNamespace(init=lambda key: None)

    monkeypatch.setenv("CUDASHIM_BUILD_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_build, "_compile", fake_compile)
    for version in ("a", "b"):
        csrc = tmp_path / version
        csrc.mkdir()
        for name in _build.SOURCES + _build._HEADERS:
            (csrc / name).parent.mkdir(parents=True, exist_ok=True)
            (csrc / name).write_text(f"// {version} {name}\n")
        monkeypatch.setattr(_build, "_CSRC", csrc)
        monkeypatch.setattr(_build, "_loaded", {})
        _build.load("CUDA")
    assert len(folders) == 2 and folders[0] != folders[1]


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's build lock has no owner: one left by a killed build made every later load wait (for 30
    minutes, then for ever). Holding the build's own lock, a torch lock found in the folder is a killed
    build's: the folder (where that build's compiler may still write) is set aside and the build starts afresh."""
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    from cudashim.emulated import _build

    seen: list[list[str]] = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kw: seen.append(sorted(os.listdir(kw["build_directory"]))))
    monkeypatch.setattr(_build, "_precompiled_header", lambda where: [])  # the build's own first step, not the killed build's
    where = tmp_path / "build"
    where.mkdir()
    (where / "lock").write_text("")  # fresh: the killed build's
    (where / "half.o").write_text("")
    _build._compile(where, False)
    assert seen == [[]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build"]


BOTH_KEYS = """
import json, torch
from cudashim.emulated._build import load
torch.utils.rename_privateuse1_backend("npu")
cuda, npu = load("CUDA"), load("PrivateUse1")
cuda.set_device_count(2)
npu.set_device_count(3)
a = cuda.device_over(torch.ones(4).view(torch.uint8), 1).view(torch.float32) * 2
b = npu.device_over(torch.ones(8).view(torch.uint8), 2).view(torch.float32) + 1
try:
    cuda.init("PrivateUse1")
    refused = ""
except RuntimeError as e:
    refused = str(e)
print(json.dumps({"files": [cuda.__file__, npu.__file__], "types": [cuda.device_type, npu.device_type],
                  "counts": [cuda.device_count(), npu.device_count()], "a": [str(a.device), a.cpu().tolist()],
                  "b": [str(b.device), b.cpu().tolist()], "refused": refused}))
"""


def test_one_process_serves_both_keys_from_one_build() -> None:
    """One build serves the cpu platform's device (CUDA) and the simulated NPU (PrivateUse1), its key
    chosen when it is loaded. A process asking for both gets the second from a copy of the file: each
    has its own globals (device counts here), registrations and device type; a loaded copy keeps its key."""
    if REAL_CUDA:
        pytest.skip("the emulated device is not used where CUDA is real")
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CUDASHIM_DISABLE": "1", "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", BOTH_KEYS], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    cached, copy = map(Path, out["files"])
    assert cached != copy and cached.parent == copy.parent and cached.read_bytes() == copy.read_bytes()
    assert out["types"] == ["cuda", "npu"] and out["counts"] == [2, 3]
    assert out["a"] == ["cuda:1", [2.0] * 4] and out["b"] == ["npu:2", [2.0] * 8]
    assert "serves CUDA, not PrivateUse1" in out["refused"], out["refused"]
