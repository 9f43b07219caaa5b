"""Test files have distinct names: the test folders are not packages, so pytest imports each file as a
top-level module by its basename, and a second file of the same name fails to collect ("import file
mismatch") — its tests then never run, in CI as anywhere."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for f in TESTS.rglob("test_*.py"):
        if not (f.parent / "__init__.py").exists():
            where[f.name].append(str(f.relative_to(TESTS)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, f"test files of one name (rename one of each): {shared}"
