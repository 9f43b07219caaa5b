"""Exit 0 when everything scripts/install would install is already here at the pinned versions.

Checked without pip (which takes seconds to start and resolve): a torch of the supported range (the
user's own is kept: scripts/install installs the pinned one only where there is none), this checkout installed
editable with its `test` extra, the test subjects of tests/requirements-subjects.txt, and the
optional tilelang extra. Prints what is missing and exits 1 otherwise. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from importlib import metadata
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
_SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|>=)\s*([^\s;#]+)")


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v.split("+")[0])[:4])


def _satisfied(line: str) -> str | None:
    """None when the requirement `line` is met, else what is wrong."""
    line, _, marker = line.partition(";")
    pv = re.search(r"python_version\s*<\s*['\"]([\d.]+)['\"]", marker)
    if pv and sys.version_info[:2] >= _version_tuple(pv.group(1)):
        return None  # a backport this interpreter does not need (tomli on 3.11+)
    m = _SPEC.match(line)
    if m is None:
        return None if not line.strip() or line.strip().startswith("#") else f"cannot read {line!r}"
    name, op, want = m.groups()
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        return f"{name} is not installed"
    # a local build tag (torch 2.13.0+cpu) is the same release as the pin
    ok = have.split("+")[0] == want if op == "==" else _version_tuple(have) >= _version_tuple(want)
    return None if ok else f"{name} {have} installed, {op}{want} wanted"


def torch_state() -> tuple[str, str]:
    """("none" | "supported" | "unsupported", what is wrong or ""): the installed torch against the range
    cudashim/_torch_compat.py names (read from the file: this script runs before the package is installed)."""
    try:
        have = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none", "torch is not installed"
    sys.path.insert(0, str(REPO))
    try:
        from cudashim import _torch_compat
    finally:
        sys.path.pop(0)
    if _torch_compat.SUPPORTED[0] <= _torch_compat.release(have) <= _torch_compat.SUPPORTED[1]:
        return "supported", ""
    return "unsupported", (f"torch {have} is installed and cudashim supports torch{_torch_compat.SUPPORTED_SPEC}; "
                           f"it is left as it is: install a supported torch yourself (pip install "
                           f"'torch{_torch_compat.SUPPORTED_SPEC}'), then run scripts/install again")


def missing() -> list[str]:
    out: list[str] = []
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    out += [why for why in [torch_state()[1]] if why]
    lines = [*project["dependencies"], *project["optional-dependencies"]["test"],
             *project["optional-dependencies"]["tilelang"],
             *(REPO / "tests" / "requirements-subjects.txt").read_text().splitlines()]
    out += [why for why in map(_satisfied, lines) if why]
    try:
        dist = metadata.distribution("cudashim")
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        if url.get("url") != REPO.as_uri() or not url.get("dir_info", {}).get("editable"):
            out.append(f"cudashim is not installed editable from {REPO}")
        elif dist.version != project["version"]:
            out.append(f"cudashim {dist.version} installed, {project['version']} in pyproject.toml")
    except metadata.PackageNotFoundError:
        out.append("cudashim is not installed")
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--torch"]:  # scripts/install: 0 a supported torch, 3 none, 4 one outside the range
        state, why = torch_state()
        if why and state == "unsupported":
            print(f"scripts/install: {why}", file=sys.stderr)
        sys.exit({"supported": 0, "none": 3}.get(state, 4))
    problems = missing()
    for p in problems:
        print(f"scripts/install: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)
