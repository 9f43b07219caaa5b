"""Config: the patch map, per-platform sub-tables, disable, and one specific error per malformed input."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudashim.config import PatchEntry, load_config
from cudashim.patches.packs import check_config
from cudashim.platform import resolve_platform_name
from cudashim.errors import ConfigError

GOOD = """
[tool.cudashim]
platform = "cpu"
disable = ["deep_select"]

[tool.cudashim.patches]
"mylib.kernels:fused" = "json:loads"

[tool.cudashim.patches.ascend]
"flash_attn:flash_attn_func" = "os.path:join"

[tool.cudashim.patches.cpu]
"flash_attn:flash_attn_func" = "os.path:split"
"""


def _write(tmp_path: Path, body: str, name: str = "pyproject.toml") -> Path:
    p = tmp_path / name
    p.write_text(body, encoding="utf-8")
    return p


def test_good_config_parses_per_platform_and_sources(tmp_path: Path) -> None:
    p = _write(tmp_path, GOOD)
    cfg = load_config(path=p, environ={})
    assert cfg.platform == "cpu"
    assert cfg.disable == frozenset({"deep_select"})
    cpu = {e.target: e for e in cfg.patches_for("cpu")}
    assert cpu["flash_attn:flash_attn_func"].replacement == "os.path:split"
    assert cpu["mylib.kernels:fused"].platform is None
    asc = {e.target: e.replacement for e in cfg.patches_for("ascend")}
    assert asc["flash_attn:flash_attn_func"] == "os.path:join"
    assert {e.target for e in cfg.patches_for("nvidia")} == {"mylib.kernels:fused"}
    # the source names the file and the exact key, so `patches` can say where a line came from
    assert cpu["flash_attn:flash_attn_func"].source == f'{p}:tool.cudashim.patches.cpu."flash_attn:flash_attn_func"'


def test_cudashim_toml_top_level_keys(tmp_path: Path) -> None:
    p = _write(tmp_path, '[patches]\n"a.b:c" = "json:dumps"\n', "cudashim.toml")
    cfg = load_config(path=p, environ={})
    assert cfg.patches == (PatchEntry("a.b:c", "json:dumps", None, f'{p}:tool.cudashim.patches."a.b:c"'),)


def test_env_disable_adds_to_file_disable(tmp_path: Path) -> None:
    p = _write(tmp_path, GOOD)
    cfg = load_config(path=p, environ={"CUDASHIM_DISABLE_PATCHES": "flash_attn, mylib.kernels:fused"})
    assert cfg.disable == frozenset({"deep_select", "flash_attn", "mylib.kernels:fused"})


def test_env_disable_without_file() -> None:
    cfg = load_config(path=None, environ={"CUDASHIM_DISABLE_PATCHES": "flash_attn_cute"}, start=None)
    assert "flash_attn_cute" in cfg.disable


def _checked(**kwargs):
    """load_config, then the checks of names done where the names live (patches: packs; platform)."""
    cfg = load_config(**kwargs)
    check_config(cfg)
    if cfg.platform is not None:
        resolve_platform_name(cfg, {})  # checks the name (cudashim.platform holds the list)
    return cfg


def test_env_disable_unknown_name_is_an_error() -> None:
    with pytest.raises(ConfigError) as e:
        _checked(environ={"CUDASHIM_DISABLE_PATCHES": "flash_atn"})
    assert "CUDASHIM_DISABLE_PATCHES" in str(e.value) and "'flash_atn'" in str(e.value)


def test_project_local_replacement_next_to_config_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "my_local_kernels_xyz.py").write_text("def f(): pass\n")
    p = _write(tmp_path, '[tool.cudashim.patches]\n"flash_attn:flash_attn_func" = "my_local_kernels_xyz:f"\n')
    assert load_config(path=p, environ={}).patches[0].replacement == "my_local_kernels_xyz:f"


# (id, [tool.cudashim] body, key the message must name, words the message must hold)
BAD = [
    ("unknown-key", 'platfrom = "cpu"', "tool.cudashim.platfrom", ["unknown key", "platform, patches, disable"]),
    ("platform-unknown", 'platform = "cuda"', "tool.cudashim.platform", ["'cuda' is not a platform"]),
    ("platform-not-string", "platform = 3", "tool.cudashim.platform", ["is a int, not a string"]),
    ("patches-not-table", 'patches = ["a:b"]', "tool.cudashim.patches", ["is not a table"]),
    ("target-no-colon", '[tool.cudashim.patches]\n"flash_attn.flash_attn_func" = "json:loads"',
     'patches."flash_attn.flash_attn_func"', ['target', 'not of the form "module:symbol"']),
    ("replacement-no-colon", '[tool.cudashim.patches]\n"flash_attn:f" = "json.loads"',
     'patches."flash_attn:f"', ["replacement 'json.loads'", 'not of the form']),
    ("replacement-not-string", '[tool.cudashim.patches]\n"flash_attn:f" = 1',
     'patches."flash_attn:f"', ["replacement 1 is a int, not a string", "quote it"]),
    ("bad-identifier", '[tool.cudashim.patches]\n"flash-attn:f" = "json:loads"',
     'patches."flash-attn:f"', ["not a valid module path and symbol"]),
    ("unknown-platform-subtable", '[tool.cudashim.patches.cuda]\n"a:b" = "json:loads"',
     "tool.cudashim.patches.cuda", ["'cuda' is not a platform sub-table", "ascend, nvidia, cpu"]),
    ("platform-subtable-not-table", '[tool.cudashim.patches]\ncpu = "json:loads"',
     "tool.cudashim.patches.cpu", ["is not a table", "[tool.cudashim.patches.cpu]"]),
    ("target-twice", '[tool.cudashim.patches]\n"a:b" = "json:loads"\n[tool.cudashim.patches.cpu]\n"a:b" = "json:dumps"',
     'patches.cpu."a:b"', ["given twice", 'also at [tool.cudashim.patches."a:b"]']),
    ("replacement-cannot-exist", '[tool.cudashim.patches]\n"a:b" = "no_such_pkg_q7:f"',
     'patches."a:b"', ["cannot be imported", "no module named 'no_such_pkg_q7'"]),
    ("replaced-by-itself", '[tool.cudashim.patches]\n"mylib:f" = "mylib:f"',
     'patches."mylib:f"', ["replaced by itself"]),
    ("target-in-stdlib", '[tool.cudashim.patches]\n"json:loads" = "mylib:f"',
     'patches."json:loads"', ["standard library", "allow_protected_targets = true"]),
    ("target-in-cudashim", '[tool.cudashim.patches]\n"cudashim.config:load_config" = "json:loads"',
     'patches."cudashim.config:load_config"', ["part of cudashim itself"]),
    ("disable-not-list", 'disable = "flash_attn"', "tool.cudashim.disable", ["is not a list of strings"]),
    ("disable-unknown", 'disable = ["flash_atn"]', "tool.cudashim.disable",
     ["'flash_atn' names neither a built-in pack", "flash_attn, flash_attn_cute, deep_select"]),
    ("tool-cudashim-not-table", None, "tool.cudashim", ["is not a table"]),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_malformed_config_names_file_key_and_fix(tmp_path: Path, case: tuple) -> None:
    _, body, key, words = case
    text = "[tool]\ncudashim = 5\n" if body is None else "[tool.cudashim]\n" + body + "\n"
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        _checked(path=p, environ={})
    msg = str(e.value)
    assert str(p) in msg, msg
    assert f"[{key}" in msg or key in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    assert "; " in msg, msg  # problem; fix


def test_every_malformed_message_is_distinct(tmp_path: Path) -> None:
    messages = set()
    for i, (_, body, _, _) in enumerate(BAD):
        d = tmp_path / str(i)
        d.mkdir()
        text = "[tool]\ncudashim = 5\n" if body is None else "[tool.cudashim]\n" + body + "\n"
        with pytest.raises(ConfigError) as e:
            _checked(path=_write(d, text), environ={})
        messages.add(str(e.value).replace(str(d), "<dir>"))
    assert len(messages) == len(BAD)


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    p = _write(tmp_path, "[tool.cudashim\nplatform = \n")
    with pytest.raises(ConfigError) as e:
        load_config(path=p, environ={})
    assert str(p) in str(e.value) and "not valid TOML" in str(e.value)
