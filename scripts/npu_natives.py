"""List the torch_npu._C names the torch-npu wheel's Python reaches; write them as data.

    python scripts/npu_natives.py [--check]

A static scan of every .py file of the wheel's torch_npu package outside torch_npu/dynamo (torchair,
the graph mode that needs CANN's graph engine): attribute chains rooted at torch_npu._C (through any
alias a file binds: `import torch_npu._C as _C`, `from torch_npu import _C`, `_C = torch_npu._C`),
`from torch_npu._C[.sub] import name`, and `getattr(torch_npu._C, "name")` with a literal name. It is
completed by import-time tracing: every module of the package imported over the simulated _C with
each attribute read on _C and its submodules recorded. The result,
cudashim/emulated/npu/releases/<release>/torch_npu_natives.json, names the wheel it came from; tests/ascend/test_natives.py
checks that every name it lists is defined by the simulated _C (behaving, or raising torch_npu's
error for what needs CANN). --check exits 1 when the file is not what this script would write.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# per torch-npu release, beside its operator table (the installed torch chooses the release)
RELEASES = ROOT / "cudashim" / "emulated" / "npu" / "releases"
_PREFIX = "torch_npu._C"


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _scan_source(text: str) -> set[str]:
    """Dotted names below torch_npu._C one file reaches (torch_npu._C.X, torch_npu._C._sub.Y)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the wheel's own invalid escape sequences
        tree = ast.parse(text)
    alias: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(_PREFIX) and a.asname:
                    alias[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full.startswith(_PREFIX):
                    alias[a.asname or a.name] = full
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            d = _dotted(node.value)
            if d and (d == _PREFIX or d.startswith(_PREFIX + ".")):
                alias[node.targets[0].id] = d
    found: set[str] = set()

    def resolve(d: str) -> str:
        head, _, rest = d.partition(".")
        if head in alias:
            return alias[head] + ("." + rest if rest else "")
        return d

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(_PREFIX):
            for a in node.names:
                found.add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Attribute):
            d = _dotted(node)
            if d:
                found.add(resolve(d))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            d = _dotted(node.args[0])
            if d:
                found.add(f"{resolve(d)}.{node.args[1].value}")
    return {f for f in found if f.startswith(_PREFIX + ".") and not f.split(".")[2].startswith("__")}


def _modules_of(names: set[str]) -> set[str]:
    """The submodules of _C: names imported from as modules, and _C children torch_npu creates."""
    mods = {"_cd", "_logging", "_flops_count", "_profiler", "_distributed_c10d", "_npurt", "_distributed_rpc", "_mstx",
            "_afd", "mlir", "dvm"}
    return mods


def static_scan(wheel: Path) -> dict[str, list[str]]:
    """{_C or _C.<submodule>: [attribute names]} the wheel's Python (outside dynamo) reaches."""
    raw: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if member.startswith("torch_npu/") and member.endswith(".py") and not member.startswith("torch_npu/dynamo/"):
                try:
                    raw |= _scan_source(zf.read(member).decode("utf-8"))
                except SyntaxError:
                    continue
    mods = _modules_of(raw)
    out: dict[str, set[str]] = {"_C": set()}
    for d in raw:
        parts = d[len(_PREFIX) + 1:].split(".")
        if parts[0] in mods:
            out["_C"].add(parts[0])
            if len(parts) > 1:
                out.setdefault(f"_C.{parts[0]}", set()).add(parts[1])
        else:
            out["_C"].add(parts[0])
    return {k: sorted(v) for k, v in sorted(out.items())}


_TRACE = r"""
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except BaseException:
        pass
"""


def trace_imports(modules: list[str]) -> dict[str, list[str]]:
    """{_C or _C.<sub>: names} read while importing every module of the package over the simulated _C."""
    # the simulated torch_npu alone: no shim activated (CUDASHIM_DISABLE), its site and this checkout first
    env = dict(os.environ, CUDASHIM_DISABLE="1", PYTHONPATH=str(ROOT))
    from cudashim.emulated.npu.site import assembled

    site = assembled()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        env["CUDASHIM_TRACE_NATIVES"] = str(out)
        proc = subprocess.run([sys.executable, "-c", _TRACE, json.dumps(["torch_npu", *modules])], capture_output=True,
                              text=True, env=env, timeout=900, cwd=tmp)
        if not out.is_file():
            raise SystemExit(f"import tracing failed:\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())


def build() -> dict:
    sys.path.insert(0, str(ROOT))
    from cudashim.emulated.npu.site import find_wheel, package_modules

    wheel = find_wheel()
    names = static_scan(wheel)
    traced = trace_imports(package_modules())
    merged: dict[str, set[str]] = {k: set(v) for k, v in names.items()}
    for k, v in traced.items():
        merged.setdefault(k, set()).update(n for n in v if not n.startswith("__"))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return {
        "generated_by": "scripts/npu_natives.py",
        "source": f"{wheel.name} (sha256 {digest}): static scan of torch_npu/**/*.py outside torch_npu/dynamo, "
                  "plus the names read on _C while importing every module of the package over the simulated _C",
        "names": {k: sorted(v) for k, v in sorted(merged.items())},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    data = build()
    sys.path.insert(0, str(ROOT))
    from cudashim._torch_compat import torch_npu_release

    out = RELEASES / torch_npu_release() / "torch_npu_natives.json"
    text = json.dumps(data, indent=1, sort_keys=False) + "\n"
    if args.check:
        if not out.is_file() or out.read_text() != text:
            print(f"{out} is not current: run python scripts/npu_natives.py", file=sys.stderr)
            return 1
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}: {sum(len(v) for v in data['names'].values())} names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
