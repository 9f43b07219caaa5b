"""Config comes from the project being run only, and never patches the standard library unasked.

A payload module that prints PAYLOAD RAN stands for an attacker's code: in each case below it must
not run. Issue 16, "Security (high)" and "Launcher" (replacement beside the config).
"""

from __future__ import annotations

from pathlib import Path

from ._trust import Trust, write

PAYLOAD = 'print("PAYLOAD RAN")\ndef loads(*a, **k):\n    return 0\ndef basename(*a, **k):\n    return "x"\ndef f(*a, **k):\n    return "payload"\n'


def test_stdlib_target_in_working_directory_config_is_refused_and_payload_never_runs(trust: Trust, tmp_path: Path) -> None:
    x = tmp_path / "x"
    write(x / "pyproject.toml", '[tool.cudashim.patches]\n"json:loads" = "payload:loads"\n')
    write(x / "payload.py", PAYLOAD)
    proc = trust.python(["-c", 'import json; print(json.loads("1"))'], cwd=x)
    assert "PAYLOAD RAN" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"  # the real json.loads ran: the process is unshimmed, not broken
    assert proc.stderr.count("WARNING") == 1, proc.stderr
    assert "json:loads" in proc.stderr and "standard library" in proc.stderr, proc.stderr


def test_pip_works_below_a_hostile_config_two_folders_up(trust: Trust, tmp_path: Path) -> None:
    top = tmp_path / "evil"
    write(top / "pyproject.toml", '[tool.cudashim.patches]\n"posixpath:basename" = "payload:basename"\n')
    write(top / "payload.py", PAYLOAD)
    below = top / "a" / "b"
    below.mkdir(parents=True)
    proc = trust.python(["-m", "pip", "--version"], cwd=below, timeout=180)
    assert "PAYLOAD RAN" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pip "), proc.stdout


def test_config_above_the_project_root_is_never_read(trust: Trust, tmp_path: Path) -> None:
    # /evil/cudashim.toml patches a module the project uses; /evil/proj is a git checkout: its root
    write(tmp_path / "cudashim.toml", '[patches]\n"mylib:f" = "payload:f"\n')
    write(tmp_path / "payload.py", PAYLOAD)
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    write(proj / "mylib.py", 'def f():\n    return "real"\n')
    write(proj / "app.py", 'import mylib\nprint(mylib.f())\n')
    for proc in (trust.python(["app.py"], cwd=proj),
                 trust.python([str(proj / "app.py")], cwd=tmp_path),  # the script's folder, not the cwd
                 trust.run(["app.py"], cwd=proj)):
        assert "PAYLOAD RAN" not in proc.stdout + proc.stderr
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "real"
        assert "cudashim" not in proc.stderr, proc.stderr


def test_search_stops_at_a_pyproject_toml_without_the_table(trust: Trust, tmp_path: Path) -> None:
    write(tmp_path / "cudashim.toml", '[patches]\n"mylib:f" = "payload:f"\n')
    write(tmp_path / "payload.py", PAYLOAD)
    proj = tmp_path / "proj"
    write(proj / "pyproject.toml", '[project]\nname = "proj"\n')
    write(proj / "src" / "mylib.py", 'def f():\n    return "real"\n')
    proc = trust.python(["-c", "import mylib; print(mylib.f())"], cwd=proj / "src")
    assert "PAYLOAD RAN" not in proc.stdout + proc.stderr
    assert proc.stdout.strip() == "real", proc.stderr


def _hostile_here_project_there(tmp: Path, config: str, app: str) -> "tuple[Path, Path]":
    """A working directory holding a hostile config and payload; a git project elsewhere with app.py."""
    here, there = tmp / "here", tmp / "there"
    write(here / "cudashim.toml", config)
    write(here / "payload.py", PAYLOAD)
    (there / ".git").mkdir(parents=True)
    write(there / "mylib.py", 'def f():\n    return "real"\n')
    write(there / "app.py", app)
    return here, there


def test_a_script_elsewhere_does_not_take_the_working_directory_config(trust: Trust, tmp_path: Path) -> None:
    here, there = _hostile_here_project_there(tmp_path, '[patches]\n"mylib:f" = "payload:f"\n',
                                              'import mylib\nprint(mylib.f())\n')
    proc = trust.python([str(there / "app.py")], cwd=here)
    assert "PAYLOAD RAN" not in proc.stdout + proc.stderr
    assert proc.stdout.strip() == "real", proc.stderr


def test_stdlib_target_applies_with_the_explicit_opt_in(trust: Trust, tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml",
          '[tool.cudashim]\nallow_protected_targets = true\n[tool.cudashim.patches]\n"json:loads" = "mine:loads"\n')
    write(tmp_path / "mine.py", 'def loads(*a, **k):\n    return "mine"\n')
    proc = trust.python(["-c", 'import json; print(json.loads("1"))'], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "mine", proc.stderr


def test_under_run_a_refused_config_stops_before_user_code_with_exit_2(trust: Trust, tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.cudashim.patches]\n"json:loads" = "payload:loads"\n')
    write(tmp_path / "payload.py", PAYLOAD)
    write(tmp_path / "app.py", 'print("USER CODE")\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "USER CODE" not in proc.stdout and "PAYLOAD RAN" not in proc.stdout
    assert "json:loads" in proc.stderr and "allow_protected_targets" in proc.stderr, proc.stderr


def test_replacement_resolves_beside_the_config_for_a_script_elsewhere(trust: Trust, tmp_path: Path) -> None:
    cfg = write(tmp_path / "examples" / "x" / "cudashim.toml", '[patches]\n"mylib:f" = "adapters:f"\n')
    write(cfg.parent / "adapters.py", 'def f():\n    return "adapted"\n')
    app = tmp_path / "elsewhere"
    write(app / "mylib.py", 'def f():\n    return "real"\n')
    write(app / "app.py", 'import mylib\nprint(mylib.f())\n')
    env = trust.env(CUDASHIM_CONFIG=str(cfg))
    proc = trust.run([str(app / "app.py")], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "adapted"


def test_the_program_asking_for_its_platform_does_not_read_the_working_directory_config(trust: Trust, tmp_path: Path) -> None:
    here, there = _hostile_here_project_there(tmp_path, 'platform = "ascend"\n[patches]\n"json:loads" = "payload:loads"\n',
                                              "import cudashim\nprint(cudashim.get_platform().name)\n")
    proc = trust.python([str(there / "app.py")], cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "cpu"
    assert "PAYLOAD RAN" not in proc.stdout + proc.stderr and proc.stderr == ""
