"""`python -m cudashim patches [--json]`: what is active on this platform, from where, in which state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")

CONFIG = """
[tool.cudashim]
disable = ["deep_select"]
[tool.cudashim.patches.cpu]
"tgt:f" = "repl:f"
[tool.cudashim.patches.nvidia]
"tgt:g" = "repl:f"
"""


def _cli(tmp_path: Path, *args: str, platform: str = "cpu") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDASHIM_")}
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]), CUDASHIM_DISABLE="1", CUDASHIM_PLATFORM=platform)
    return subprocess.run([sys.executable, "-m", "cudashim", "patches", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


def test_json_lists_builtin_and_config_patches_for_this_platform(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pyproject.toml": CONFIG, "tgt.py": "def f(): pass\n", "repl.py": "def f(): pass\n"})
    proc = _cli(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["target"]: r for r in json.loads(proc.stdout)}
    assert rows["tgt:f"]["source"] == f'{tmp_path / "pyproject.toml"}:tool.cudashim.patches.cpu."tgt:f"'
    assert rows["tgt:f"]["expect"] == "patch" and rows["tgt:f"]["state"] == "pending"
    assert "tgt:g" not in rows                                  # nvidia-only line
    assert "deep_select.interface:topk" not in rows             # disabled pack
    assert rows["flash_attn:flash_attn_func"]["source"] == "built-in:flash_attn"
    assert rows["flash_attn:flash_attn_func"]["expect"] == "stand-in"


def test_table_and_bad_config_exit_code(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pyproject.toml": CONFIG, "tgt.py": "def f(): pass\n", "repl.py": "def f(): pass\n"})
    proc = _cli(tmp_path, platform="nvidia")
    assert proc.returncode == 0, proc.stderr
    assert "platform: nvidia" in proc.stdout and "tgt:g" in proc.stdout and "tgt:f" not in proc.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.cudashim]\ndisable = ["nope"]\n')
    proc = _cli(tmp_path)
    assert proc.returncode == 2 and "'nope' names neither" in proc.stderr


def test_live_states_when_the_hook_is_installed(shim: Callable[..., str]) -> None:
    out = shim("""
        import json, io, contextlib
        from cudashim.cli import patches as cli
        patches.install(cfg(("tgt:f", "repl:f")), "cpu")
        import tgt, flash_attn
        tgt.f
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert cli.main(["--json", "--platform", "cpu"]) == 0
        rows = {r["target"]: r for r in json.loads(buf.getvalue())}
        assert rows["tgt:f"]["state"] == "applied" and rows["tgt:f"]["resolved"]
        assert rows["flash_attn:flash_attn_func"]["state"] == "stood-in"
        assert rows["deep_select.interface:topk"]["state"] == "pending"
        print("OK")
    """, {"tgt.py": "def f(): pass\n", "repl.py": "def f(): pass\n"})
    assert "OK" in out
