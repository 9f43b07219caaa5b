"""The native core's sources include a precompiled shim.h (ATen's headers, parsed once for all of them).
g++ takes a precompiled header only where it was made with the flags the source is compiled with, and
otherwise parses the headers again without a word: the build would still be right, only slow. The
build's own record of the sources' flags (torch's build.ninja in the build folder) is the oracle, against
the flags the header records it was made with."""

from __future__ import annotations

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
    # the header's own record of the flags it was made with: the same build, whichever checkout and
    # Python environment made it (the cache is keyed by the sources' contents and torch's version)
    first = (where / _build._PCH).read_text().splitlines()[0]
    assert first.startswith(f"// {_build._MADE_WITH}"), first
    made_with = shlex.split(first[len(f"// {_build._MADE_WITH}"):])
    assert cflags == made_with + ["-include", str(where / _build._PCH)]
    # the header was made and removed after the build: hundreds of MB that nothing reads again
    assert (where / _build._PCH).exists() and not (where / f"{_build._PCH}.gch").exists()
