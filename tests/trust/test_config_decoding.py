"""Config files are decoded safely: an unrelated pyproject.toml is never a reason to stop, and a bad
file is named in the error. Issue 16: non-UTF-8 pyproject.toml / cudashim.toml, large pyproject.toml."""

from __future__ import annotations

from pathlib import Path

from ._trust import Trust, write


def test_non_utf8_pyproject_without_the_table_does_not_stop_run(trust: Trust, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "caf\xe9"\n')
    write(tmp_path / "app.py", 'print("USER CODE")\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "USER CODE"
    assert proc.stderr == ""


def test_non_utf8_cudashim_toml_is_named_in_the_error(trust: Trust, tmp_path: Path) -> None:
    cfg = tmp_path / "cudashim.toml"
    cfg.write_bytes(b'platform = "cpu"\n# caf\xe9\n')
    write(tmp_path / "app.py", 'print("USER CODE")\n')
    proc = trust.run(["app.py"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "USER CODE" not in proc.stdout
    assert str(cfg) in proc.stderr and "UTF-8" in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr


def test_large_unrelated_pyproject_is_not_read_whole(trust: Trust, tmp_path: Path) -> None:
    # 64 MiB of an unrelated table; a probe counts the bytes the bootstrap reads from that file
    big = tmp_path / "pyproject.toml"
    with open(big, "wb") as f:
        f.write(b'[project]\nname = "big"\n[tool.other]\n')
        line = b'k = "' + b"x" * 1000 + b'"\n'
        f.write(line * (64 * 1024))
    # VmHWM: this interpreter's peak (ru_maxrss would carry the forking test process's over exec)
    code = ("hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
            "import cudashim._bootstrap as b; print(b.status()['active'], hwm)")
    proc = trust.python(["-c", code], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    active, maxrss_kib = proc.stdout.split()
    assert active == "True"
    # a whole read of the file would hold 64 MiB (twice, decoded); the bootstrap's own memory is a few MiB
    assert int(maxrss_kib) < 48 * 1024, maxrss_kib
