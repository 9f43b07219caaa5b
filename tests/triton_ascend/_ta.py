"""What tests/triton_ascend shares: the triton-ascend wheel (fetched into the wheel cache, never installed) and
its lines, read from the wheel so a test quotes the wheel rather than a copy."""

from __future__ import annotations

import ast
import re
import zipfile
from pathlib import Path

import pytest

from cudashim.triton_route import ascend_compile

__all__ = ["need_wheel", "wheel_line", "wheel_string"]


def need_wheel() -> Path:
    wheel, why = ascend_compile.fetch()
    if wheel is None:
        pytest.skip(f"the Ascend checks quote and run the {ascend_compile.WHEEL_SPEC} wheel: {why}")
    return wheel


def wheel_line(path: str, lineno: int) -> str:
    """Line `lineno` (1-based) of file `path` inside the triton-ascend wheel."""
    with zipfile.ZipFile(need_wheel()) as z:
        return z.read(path).decode().splitlines()[lineno - 1]


def wheel_string(path: str, lineno: int) -> str:
    """The first string literal on that line of the wheel (the wording the wheel raises); of an f-string,
    the text before its first placeholder."""
    line = wheel_line(path, lineno)
    m = re.search(r'(f?)"((?:[^"\\]|\\.)*)"', line)
    if m is None:
        raise LookupError(f"no string on {path}:{lineno}: {line}")
    text = ast.literal_eval('"' + m.group(2) + '"')
    return text.split("{")[0] if m.group(1) else text
