"""The aten operators only CUDA implements, from torch's native_functions.yaml, and what the emulated cuda
device does with each (cudashim/emulated/cuda_only.py decides).

    python scripts/cuda_only_ops.py --write    # cudashim/emulated/cuda_only_ops.json and the block in
                                               # docs/cuda-only-operators.md
    python scripts/cuda_only_ops.py --check    # exit 1 when either is out of date (a test runs this)

An operator is CUDA-only when its `dispatch:` names CUDA and none of CPU and the composite keys
(CompositeExplicitAutograd, CompositeExplicitAutogradNonFunctional, CompositeImplicitAutograd): a
program calling it on the device would otherwise reach the CPU's missing kernel. The yaml is the
installed torch's own (torchgen/packaged/ATen/native/native_functions.yaml), or --yaml PATH.

The list keeps one entry per supported torch release (major.minor), each written by that release's
interpreter (`--write` replaces only the installed release's entry; `--check` compares it): the device
registers the union, since an operator another release lists is skipped where this torch lacks it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LIST = REPO / "cudashim" / "emulated" / "cuda_only_ops.json"
DOC = REPO / "docs" / "cuda-only-operators.md"
BLOCK = re.compile(r"(<!-- cuda-only:begin -->\n)(.*?)(<!-- cuda-only:end -->)", re.S)
_OTHER = {"CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutograd"}


def _yaml_path() -> Path:
    import torchgen

    return Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"


def cuda_only(yaml_text: str) -> list[dict[str, object]]:
    import yaml

    rows = []
    for f in yaml.safe_load(yaml_text):
        keys = {k.strip() for ks in (f.get("dispatch") or {}) for k in ks.split(",")}
        if "CUDA" in keys and not keys & _OTHER:
            rows.append({"op": f["func"].split("(")[0], "keys": sorted(keys)})
    return rows


def listing(yaml_path: Path, current: dict[str, object]) -> str:
    """The list with the installed torch release's entry made from yaml_path, the other releases' kept."""
    import torch

    version = torch.__version__.split("+")[0]
    releases = dict(current.get("releases") or {})
    releases[".".join(version.split(".")[:2])] = {"torch": version, "operators": cuda_only(yaml_path.read_text())}
    data = {"source": "torchgen/packaged/ATen/native/native_functions.yaml",
            "releases": dict(sorted(releases.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))}
    return json.dumps(data, indent=1) + "\n"


def table(data: dict[str, object]) -> str:
    sys.path.insert(0, str(REPO))
    from cudashim.emulated.cuda_only import decision, union

    releases = list(data["releases"])  # type: ignore[arg-type]
    rows = union(data)
    kernels = sum(decision(str(r["op"]))[0] == "kernel" for r in rows)
    lines = [f"{len(rows)} operators over torch {', '.join(releases)}; {kernels} with a kernel on the device, "
             f"{len(rows) - kernels} refused with a CapabilityError naming the operator and the way out.", "",
             "| operator | CUDA's keys | torch | on the device |", "|---|---|---|---|"]
    for r in rows:
        what, why = decision(str(r["op"]))
        cell = f"kernel: {why}" if what == "kernel" else f"CapabilityError: {why}"
        where = "all" if r["releases"] == releases else ", ".join(r["releases"])
        lines.append(f"| `{r['op']}` | {', '.join(map(str, r['keys']))} | {where} | {cell.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    ap.add_argument("--yaml", type=Path, default=None)
    a = ap.parse_args(argv)
    text = listing(a.yaml or _yaml_path(), json.loads(LIST.read_text()) if LIST.is_file() else {})
    doc = DOC.read_text()
    block = BLOCK.search(doc)
    if block is None:
        print(f"{DOC}: no <!-- cuda-only:begin --> block", file=sys.stderr)
        return 1
    new_doc = doc[: block.start(2)] + table(json.loads(text)) + doc[block.end(2):]
    if a.write:
        LIST.write_text(text)
        DOC.write_text(new_doc)
        return 0
    stale = [str(p.relative_to(REPO)) for p, want in ((LIST, text), (DOC, new_doc))
             if not p.is_file() or p.read_text() != want]
    if stale:
        print("out of date: " + ", ".join(stale) + " (run python scripts/cuda_only_ops.py --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
