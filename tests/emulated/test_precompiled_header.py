"""The native core's sources include a precompiled shim.h (ATen's headers, parsed once for all of them).
g++ takes a precompiled header only where it was made with the flags the source is compiled with, and
otherwise parses the headers again without a word: the build would still be right, only slow. The
build's own record of its flags (torch's build.ninja in the build folder) is the oracle."""

from __future__ import annotations

import os
import shlex

import pytest


def test_the_precompiled_header_is_made_with_the_flags_the_sources_are_compiled_with() -> None:
    torch = pytest.importorskip("torch")
    from cudashim.emulated import _build

    where = _build.build_dir() / f"build-{_build._NAME}-{_build._key(torch.__version__)}"
    ninja = where / "build.ninja"
    if not ninja.exists():
        pytest.skip(f"no build of the core here ({where}): the library came from another cache")
    cflags = next(shlex.split(line.split("=", 1)[1]) for line in ninja.read_text().splitlines()
                  if line.startswith("cflags ="))
    want = _build.compile_flags() + ["-include", str(where / _build._PCH)]
    # the library is cached by its sources' contents: another checkout of the same sources may have built
    # it, and the flags then name that checkout's csrc/
    built_from = [f for f in cflags if f.startswith("-I") and f.endswith(f"{os.sep}csrc")]
    if built_from:
        want = [built_from[0] if f == f"-I{_build._CSRC}" else f for f in want]
    assert cflags == want
    # the header was made and removed after the build: hundreds of MB that nothing reads again
    assert (where / _build._PCH).exists() and not (where / f"{_build._PCH}.gch").exists()
