"""Comments and docstrings state invariants and reasons; history stays out of the code.

Measurements, dates, machine descriptions and issue numbers belong in commit messages and in
benchmarks/results/*.json: in code they go stale the day the code or the machine changes, and a reader
cannot tell a reason from a reading. This test holds that line for cudashim/ and csrc/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: what history looks like in a source line, each with the way out
RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "issue number": (re.compile(r"\b[Ii]ssues?\s*#?\d+"), "say what the code does and why; the issue goes in the commit"),
    "date": (re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"), "dates go in commit messages and results files"),
    "machine": (re.compile(r"\b(?:this|the|an?)\s+(?:VM|box|H100|H200|A100|B200|2-core)\b|\bon this (?:host|machine)\b"),
                "name the condition (a GPU, a CPU-only install), not the machine it was seen on"),
    "measurement": (re.compile(r"(?<![\w.%/])~?\d+(?:\.\d+)?\s?(?:µs|us|ns|ms)\b|(?<![\w%])\d+(?:\.\d+)?\s?%(?![sdifrx(])|\d(?:\.\d+)?\s?×"),
                    "timings and percentages go in benchmarks/results/; state the reason instead"),
    "ratio or count of runs": (re.compile(r"~?[1-9]\d*(?:\.\d+)?\s?x\s+(?:slower|faster|larger|smaller|more|less|fewer)\b"
                                          r"|\b\d+ (?:of|in) \d+ (?:[\w-]+ ){0,3}(?:runs|rounds|tries)\b"),
                               "a speed-up or a failure rate is a measurement: it goes in a commit message"),
}

SOURCES = ("*.py", "*.cpp", "*.h", "*.md")


def _files(root: Path) -> list[Path]:
    return sorted(p for pat in SOURCES for p in root.rglob(pat) if "__pycache__" not in p.parts)


def violations(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for what, (pattern, fix) in RULES.items():
                m = pattern.search(line)
                if m:
                    found.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{n}: "
                                 f"{what} {m.group(0)!r} ({fix})")
    return found


def test_code_comments_hold_no_history() -> None:
    found = violations(_files(REPO / "cudashim") + _files(REPO / "csrc"))
    assert not found, "history in code comments:\n" + "\n".join(found)


@pytest.mark.parametrize("planted", [
    "# see issue 12 for why",
    "// 2026-12-02: measured on this VM",
    "# nano-vllm ran 1.6 % slower without it",
    '"""Launching costs 27 µs per call."""',
    "# checked on an H200",
    "// falls to math, ~10x slower",
    "// seen in ~1 of 6 two-rank DDP runs",
])
def test_a_planted_line_is_caught(tmp_path: Path, planted: str) -> None:
    f = tmp_path / "mod.py"
    f.write_text("x = 1\n" + planted + "\n")
    assert violations([f]), f"the rule missed {planted!r}"


@pytest.mark.parametrize("fine", [
    "# sizes round up to 512 bytes, as CUDA's caching allocator does",
    'raise ValueError("%d%% done" % n)',
    "# blocks over 128 KiB stay cached",
    "# an eighth of the host's memory at most",
    'f"cudaHostUnregister(0x{ptr:x})"',
    "// since torch 2.1x the state holds a Python object",
])
def test_invariants_pass(tmp_path: Path, fine: str) -> None:
    f = tmp_path / "mod.py"
    f.write_text(fine + "\n")
    assert not violations([f])
