"""A large pyproject.toml without [tool.cudashim] in the working folder: every shimmed start read it
whole to learn the table is not there. Its answer is now kept per version of the file, so a later
start reads none of it; any change to the file makes the next start scan it again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudashim import config

LINE = "# " + "x" * 98 + "\n"


def _big(path: Path, table_at_end: bool = False) -> Path:
    with open(path, "w") as f:
        f.write('[project]\nname = "big"\n')
        f.write(LINE * (2 * config._KEEP // len(LINE)))  # twice the size from which answers are kept
        if table_at_end:
            f.write('[tool.cudashim]\nplatform = "cpu"\n')
    return path


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The paths config opens for reading as bytes (the scans), with the user's cache folder in tmp."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen: list[str] = []

    def spy(file, mode="r", *args, **kwargs):  # noqa: ANN001, ANN202
        if mode == "rb":
            seen.append(str(file))
        return open(file, mode, *args, **kwargs)

    monkeypatch.setattr(config, "open", spy, raising=False)
    return seen


def test_a_large_pyproject_without_the_table_is_read_once(tmp_path: Path, reads: list[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pyproject = _big(project / "pyproject.toml")
    assert config.find_config_file(project) is None
    assert reads == [str(pyproject)]
    for _ in range(3):  # later starts: the kept answer, none of the file
        assert config.find_config_file(project) is None
    assert reads == [str(pyproject)]


def test_a_change_to_the_file_is_seen_by_the_next_start(tmp_path: Path, reads: list[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pyproject = _big(project / "pyproject.toml")
    assert config.find_config_file(project) is None
    with open(pyproject, "a") as f:  # the same size would do as well: the change time moves
        f.write('[tool.cudashim]\nplatform = "cpu"\n')
    assert config.find_config_file(project) == pyproject
    assert config.load_config(project).platform == "cpu"


def test_small_files_are_scanned_every_time_and_nothing_is_kept(tmp_path: Path, reads: list[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "small"\n')
    assert config.find_config_file(project) is None
    assert config.find_config_file(project) is None
    assert len(reads) == 2
    assert not (tmp_path / "cache").exists()


def test_an_unwritable_cache_folder_only_costs_the_scan(tmp_path: Path, reads: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cache").write_text("a file where the folder would be")
    project = tmp_path / "project"
    project.mkdir()
    pyproject = _big(project / "pyproject.toml", table_at_end=True)
    assert config.find_config_file(project) == pyproject
    assert config.find_config_file(project) == pyproject
    assert reads.count(str(pyproject)) >= 2
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p or p.startswith("cache.")]
