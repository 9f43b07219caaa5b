"""Check the simulated NPU's dtype checks (cudashim/emulated/npu/releases/<release>/torch_npu_dtype_checks.json) against
their sources.

The file is curated: each entry is a TORCH_CHECK in an op-plugin op_api kernel that refuses dtypes, kept
where it applies to torch_npu 2.13.0 on a 910B unconditionally or on the call's argument dtypes alone
(checks that depend on the CANN version, on tensor values or on a fast route are left out). This script
re-reads the sources at the commits the file names and fails on any entry that no longer holds:

- the cited line of the cited file holds the entry's `code` and its message text;
- every aten operator of the entry is dispatched to op-plugin's handwritten op_api kernel for v2.13
  (op_plugin_functions.yaml lists an op_api implementation for v2.13 without `gen_opapi`, which would
  make the kernel a generated one); on a 910B jit compile is off by default (CheckJitDisable,
  torch_npu/csrc/framework/interface/EnvVariables.cpp), so op-plugin's wrapper calls op_api::
  (torchnpugen/gen.py);
- each operator is in the simulated operator table (torch_npu_ops.json) and the arguments the
  conditions name exist in torch's schema of it;
- the error codes are formatErrorCode's for the macros named (NPUException.h / NPUException.cpp).

Usage: python scripts/npu_dtype_checks.py --op-plugin DIR --pytorch DIR [--release 2.14.0]  (git directories,
e.g. GitHub snapshots); prints one line per entry and exits 1 on any mismatch. --relocate rewrites each entry's
line to where its check stands at the commit the release's operator table names (a new release's file
starts as a copy of the previous one's), then checks it as above.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

from npu_op_table import OP_PLUGIN_PATH, SECTIONS, git, op_name, versions  # the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ROOT / "cudashim/emulated/npu/releases"
CHECKS = RELEASES / "2.13.0/torch_npu_dtype_checks.json"
OPS = RELEASES / "2.13.0/torch_npu_ops.json"
VERSION = "v2.13"


def op_api_kernels(yaml_text: str) -> dict[str, bool]:
    """aten operator -> whether its op_api kernel for VERSION is generated (gen_opapi), for every operator
    op_plugin_functions.yaml gives an op_api kernel for VERSION."""
    doc = yaml.safe_load(yaml_text)
    all_version = [str(v) for v in doc["all_version"]]
    return {op_name(item["func"]): bool(item.get("gen_opapi"))
            for section in SECTIONS for item in doc.get(section) or []
            if VERSION in versions(item.get("op_api"), all_version)}


def error_codes(pytorch: str, commit: str) -> dict[str, str]:
    """'OPS_ERROR(ErrCode::TYPE)' -> 'ERR01002 OPS invalid type', read from NPUException.h / .cpp."""
    header = git(pytorch, "show", f"{commit}:torch_npu/csrc/core/npu/NPUException.h")
    source = git(pytorch, "show", f"{commit}:torch_npu/csrc/core/npu/NPUException.cpp")
    sub = {m[0]: int(m[1]) for m in re.findall(r"(\w+) = (\d+)", re.search(r"enum class SubModule \{([^}]*)\}", header)[1])}
    code = {m[0]: int(m[1]) for m in re.findall(r"(\w+) = (\d+)", re.search(r"enum class ErrCode \{([^}]*)\}", header)[1])}
    text = dict(re.findall(r"\{ErrCode::(\w+), \"([^\"]+)\"\}", source))
    macros = dict(re.findall(r"#define (\w+)_ERROR\(error\) formatErrorCode\(SubModule::(\w+), error\)", header))
    return {f"{m}_ERROR(ErrCode::{c})": f"ERR{sub[s]:02d}{code[c]:03d} {s} {text[c]}"
            for m, s in macros.items() for c in code if c in text}


def relocate(op_plugin: str, pytorch: str) -> None:
    """Point the file at the commits its release's operator table names, each entry at its check's line there
    (the line holding its error code and the first part of its message nearest the old line)."""
    data = json.loads(CHECKS.read_text())
    table = json.loads(OPS.read_text())
    commits = {s["repo"]: s["commit"] for s in table["sources"]}
    for source in data["sources"]:
        source["commit"] = commits[source["repo"]]
        source["ref"] = f"the commit {OPS.parent.name}'s torch_npu_ops.json names"
    data["torch_npu"] = OPS.parent.name
    for check in data["checks"]:
        lines = git(op_plugin, "show", f"{commits['Ascend/op-plugin']}:{check['path']}").splitlines()
        first = next((p for p in re.split(r"\{[^}]*\}", check["message"].strip()) if p.strip()), "")
        hits = [i + 1 for i, line in enumerate(lines) if check["code"] in line
                and first[:20] in " ".join(x.strip() for x in lines[i:i + 7])]
        if hits:
            check["line"] = min(hits, key=lambda n: abs(n - check["line"]))
    CHECKS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op-plugin", required=True, help="git directory of Ascend/op-plugin")
    p.add_argument("--pytorch", required=True, help="git directory of Ascend/pytorch")
    p.add_argument("--release", default="2.13.0", help="the torch-npu release whose file is checked")
    p.add_argument("--relocate", action="store_true", help="move each entry to its check's line at the table's commits")
    a = p.parse_args(argv)
    global CHECKS, OPS, VERSION
    CHECKS, OPS = RELEASES / a.release / CHECKS.name, RELEASES / a.release / OPS.name
    VERSION = "v" + ".".join(a.release.split(".")[:2])
    if a.relocate:
        relocate(a.op_plugin, a.pytorch)
    import torch

    data = json.loads(CHECKS.read_text())
    plugin = next(s for s in data["sources"] if s["repo"] == "Ascend/op-plugin")["commit"]
    pytorch = next(s for s in data["sources"] if s["repo"] == "Ascend/pytorch")["commit"]
    table = json.loads(OPS.read_text())
    pinned = next(s for s in table["sources"] if s["repo"] == "Ascend/op-plugin")["commit"]
    bad: list[str] = []
    if plugin != pinned:
        bad.append(f"op-plugin commit {plugin} is not the one torch_npu_ops.json names ({pinned})")
    kernels = op_api_kernels(git(a.op_plugin, "show", f"{plugin}:{OP_PLUGIN_PATH}"))
    codes = error_codes(a.pytorch, pytorch)
    for key, want in data["error_codes"].items():
        if not key.startswith("_") and codes.get(key) != want:
            bad.append(f"error code {key}: the file says '{want}', NPUException says '{codes.get(key)}'")
    for check in data["checks"]:
        where = f"{check['path']}:{check['line']}"
        lines = git(a.op_plugin, "show", f"{plugin}:{check['path']}").splitlines()
        statement = " ".join(line.strip() for line in lines[check["line"] - 1:check["line"] + 6])
        problems = []
        if check["code"] not in lines[check["line"] - 1]:
            problems.append(f"line {check['line']} does not hold {check['code']!r}")
        for part in re.split(r"\{[^}]*\}", check["message"].strip()):
            if part and json.dumps(part)[1:-1] not in statement and part not in statement:
                problems.append(f"the message part {part!r} is not in the check")
        if check["error"] not in statement:
            problems.append(f"{check['error']} is not what the check appends")
        for op in check["ops"]:
            if op not in kernels:
                problems.append(f"aten::{op} has no op_api kernel for {VERSION}")
            elif kernels[op]:
                problems.append(f"aten::{op}'s op_api kernel is generated (gen_opapi), not {check['path']}")
            if op not in table["ops"]:
                problems.append(f"aten::{op} is not in torch_npu_ops.json")
            name, _, overload = op.partition(".")
            args = {x.name for x in getattr(getattr(torch.ops.aten, name), overload or "default")._schema.arguments}
            problems += [f"aten::{op} has no argument {c['arg']}" for c in check["when"] if c["arg"] not in args]
        print(f"{'ok ' if not problems else 'BAD'} {','.join(check['ops'])}: {where}" + "".join(f"\n    {x}" for x in problems))
        bad += [f"{where}: {x}" for x in problems]
    for op in data["run_whole"]:
        if op not in table["ops"]:
            bad.append(f"run_whole: aten::{op} is not in torch_npu_ops.json (torch_npu has no kernel to run whole)")
    for line in bad:
        sys.stderr.write(line + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
