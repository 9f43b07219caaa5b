"""Under `cudashim run`, every config error that can be found without running user code stops the
process before it with exit 2; under a bare PYTHONPATH activation the same error is one warning and
an unshimmed, working process. Issue 16: attribute typo, cycles, chains, `patches --check`."""

from __future__ import annotations

from pathlib import Path

from ._trust import Trust, write

APP = 'print("USER CODE")\nimport mylib\nprint(mylib.f())\n'


def _project(tmp: Path, patches: str, **modules: str) -> Path:
    (tmp / ".git").mkdir()
    write(tmp / "cudashim.toml", "[patches]\n" + patches)
    write(tmp / "mylib.py", 'def f():\n    return "real"\ndef g():\n    return "real g"\n')
    write(tmp / "app.py", APP)
    for name, text in modules.items():
        write(tmp / f"{name.replace('__', '/')}.py", text)
    return tmp


def test_replacement_missing_its_attribute_stops_run_before_user_code(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:ff"\n', adapters='def f():\n    return "adapted"\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "USER CODE" not in proc.stdout
    assert "'ff'" in proc.stderr and "adapters" in proc.stderr and "cudashim.toml" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_replacement_submodule_missing_stops_run(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters.nothere:f"\n', adapters____init__="", )
    (tmp_path / "adapters").mkdir(exist_ok=True)
    write(tmp_path / "adapters" / "__init__.py", 'print("PACKAGE RAN")\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "adapters.nothere" in proc.stderr
    assert "PACKAGE RAN" not in proc.stdout  # found without running the replacement's package


def test_attribute_check_does_not_run_the_replacement(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:f"\n',
             adapters='print("ADAPTERS RAN")\nif True:\n    def f():\n        return "adapted"\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the replacement runs at first use, after user code started
    assert proc.stdout.split() == ["USER", "CODE", "ADAPTERS", "RAN", "adapted"]


def test_module_getattr_replacement_is_checked_at_first_use(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:f"\n',
             adapters='def __getattr__(name):\n    if name == "f":\n        return lambda: "dynamic"\n    raise AttributeError(name)\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "dynamic"


def test_replacement_failing_on_import_names_the_config_line_and_the_error(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:f"\n',
             adapters='raise RuntimeError("adapter broken")\ndef f():\n    return 1\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 1
    assert "USER CODE" in proc.stdout
    assert "PatchError" in proc.stderr and "adapter broken" in proc.stderr and "cudashim.toml" in proc.stderr


def test_patch_cycle_is_refused(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "other:g"\n"other:g" = "mylib:f"\n', other='def g():\n    return 1\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "USER CODE" not in proc.stdout
    assert "cycle" in proc.stderr, proc.stderr


def test_patch_chain_is_refused(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "b:g"\n"b:g" = "c:h"\n', b='def g():\n    return 1\n', c='def h():\n    return 2\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "USER CODE" not in proc.stdout
    assert "chain" in proc.stderr and "b:g" in proc.stderr, proc.stderr


def test_bare_activation_with_a_typo_warns_once_and_runs_unshimmed(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:ff"\n', adapters='def f():\n    return "adapted"\n')
    proc = trust.python(["app.py"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["USER", "CODE", "real"]
    assert proc.stderr.count("WARNING") == 1 and "'ff'" in proc.stderr, proc.stderr


def test_patches_check_imports_every_replacement(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:f"\n', adapters='def f():\n    return "adapted"\n')
    ok = trust.cli(["patches", "--check"], cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # a module __getattr__ that does not give the name: only importing can tell
    write(tmp_path / "adapters.py", 'def __getattr__(name):\n    raise AttributeError(name)\n')
    bad = trust.cli(["patches", "--check"], cwd=tmp_path)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "mylib:f" in bad.stdout + bad.stderr and "adapters" in bad.stdout + bad.stderr
    write(tmp_path / "adapters.py", 'raise ImportError("no backend")\ndef f():\n    return 1\n')
    broken = trust.cli(["patches", "--check"], cwd=tmp_path)
    assert broken.returncode == 2 and "no backend" in broken.stdout + broken.stderr


def test_doctor_and_patches_say_which_config_applies_and_why(trust: Trust, tmp_path: Path) -> None:
    _project(tmp_path, '"mylib:f" = "adapters:f"\n', adapters='def f():\n    return "adapted"\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    for cmd in (["patches"], ["doctor"]):
        proc = trust.cli(cmd, cwd=sub)
        out = proc.stdout
        assert str(tmp_path / "cudashim.toml") in out, out
        assert "project root" in out and str(tmp_path) in out, out


def test_a_bare_folder_beside_the_config_does_not_shadow_an_importable_package(trust: Trust, tmp_path: Path) -> None:
    # a folder named like the replacement's package (a checkout, data) but without __init__.py
    _project(tmp_path, '"mylib:f" = "realpkg.impl:f"\n')
    (tmp_path / "realpkg").mkdir()
    site = tmp_path / "site"
    write(site / "realpkg" / "__init__.py", "")
    write(site / "realpkg" / "impl.py", 'def f():\n    return "installed"\n')
    env = trust.env()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    proc = trust.run(["app.py"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "installed"
