"""Generate the simulated NPU's operator table: the aten operators torch_npu registers for the NPU.

torch_npu's NPU kernels (the PrivateUse1 key) come from two files, read here at the commits torch_npu
2.13.0 is built from (Ascend/pytorch's tag v26.2.0-beta.1-pytorch2.13.0, whose npu_native_functions.yaml
is byte-identical to the 2.13.0 wheel's, and the op-plugin commit that tag pins as its submodule):

- Ascend/op-plugin `op_plugin/config/op_plugin_functions.yaml`: every operator with the versions its
  `acl_op` / `op_api` / `sparse` implementations cover (a list, `all_version`, or `[from, to|newest]`
  over `all_version`), selected for one version exactly as op-plugin's own generator does
  (torchnpugen/gen_op_plugin_functions.py, get_version in torchnpugen/op_codegen_utils.py);
- Ascend/pytorch `torch_npu/csrc/aten/npu_native_functions.yaml`: the operators torch_npu registers itself
  (its `supported` list; `custom` holds npu:: operators, not aten ones).

Usage (the two repositories as git directories, e.g. GitHub snapshots):

    python scripts/npu_op_table.py --pytorch DIR --op-plugin DIR [--pytorch-rev REV] [--version v2.13] \
        [--wheel WHEEL] > cudashim/emulated/npu/torch_npu_ops.json

--wheel reads the wheel's own generated list (torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml):
operators it registers that the two files at those commits lack (the wheel was built from a later
op-plugin commit than any published with the tag) are added and listed under `wheel_only`; an operator
of the files missing from the wheel is an error (the commits are then not the wheel's).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

PYTORCH_REPO = "Ascend/pytorch"
OP_PLUGIN_REPO = "Ascend/op-plugin"
PYTORCH_REV = "v26.2.0-beta.1-pytorch2.13.0"
OP_PLUGIN_PATH = "op_plugin/config/op_plugin_functions.yaml"
NATIVE_PATH = "torch_npu/csrc/aten/npu_native_functions.yaml"
WHEEL_CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
SECTIONS = ("official", "symint", "autograd")  # aten operators; `custom` and `quant` are npu:: ones


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True, text=True).stdout


def versions(spec: Any, all_version: list[str]) -> list[str]:
    """op-plugin's get_version: the versions a field names."""
    if spec is None:
        return []
    if isinstance(spec, list):
        start = all_version.index(str(spec[0]).strip())
        end = str(spec[1]).strip()
        return all_version[start:] if end == "newest" else all_version[start:all_version.index(end) + 1]
    if spec == "all_version":
        return list(all_version)
    return [v.strip() for v in str(spec).split(",")]


def op_name(func: str) -> str:
    """'abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)' -> 'abs.out'."""
    return func.split("(", 1)[0].strip()


def since(covered: set[str], all_version: list[str], version: str) -> str:
    """The first version of the unbroken run of covered versions that ends at `version`."""
    i = all_version.index(version)
    while i > 0 and all_version[i - 1] in covered:
        i -= 1
    return all_version[i].lstrip("v")


def op_plugin_ops(text: str, version: str) -> tuple[dict[str, str], list[str], list[str]]:
    """(aten operator -> native since, operators with a sparse kernel, all_version) for `version`."""
    doc = yaml.safe_load(text)
    all_version = [str(v) for v in doc["all_version"]]
    if version not in all_version:
        raise SystemExit(f"{version} is not in op-plugin's all_version {all_version}; pick one of them")
    ops: dict[str, str] = {}
    sparse: list[str] = []
    for section in SECTIONS:
        for item in doc.get(section) or []:
            kernels = set(versions(item.get("acl_op"), all_version)) | set(versions(item.get("op_api"), all_version))
            sparse_versions = set(versions(item.get("sparse"), all_version))
            if version not in kernels | sparse_versions:
                continue
            name = op_name(item["func"])
            if name.startswith("npu_"):
                continue  # torch_npu's own operators (the npu namespace) share these sections; aten has no npu_*
            if version in sparse_versions:
                sparse.append(name)
            if version in kernels:
                ops[name] = min(ops.get(name, "9"), since(kernels, all_version, version), key=_vkey)
    return ops, sorted(set(sparse)), all_version


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def native_ops(text: str) -> list[str]:
    doc = yaml.safe_load(text)
    out = []
    for item in doc.get("supported") or []:
        out.append(item if isinstance(item, str) else op_name(item["func"]))
    return sorted(set(out))


def wheel_ops(wheel: str) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        doc = yaml.safe_load(zf.read(WHEEL_CODEGEN))
    names = set()
    for section in ("supported", "symint", "autograd"):
        for item in doc.get(section) or []:
            names.add(item if isinstance(item, str) else op_name(item["func"]))
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pytorch", required=True, help="git directory of Ascend/pytorch")
    p.add_argument("--op-plugin", required=True, help="git directory of Ascend/op-plugin")
    p.add_argument("--pytorch-rev", default=PYTORCH_REV, help=f"Ascend/pytorch revision (default {PYTORCH_REV})")
    p.add_argument("--version", default="v2.13", help="op-plugin version tag of the torch_npu simulated")
    p.add_argument("--wheel", help="the torch_npu wheel simulated: its generated operator list completes the table")
    a = p.parse_args(argv)

    pt_commit = git(a.pytorch, "rev-parse", f"{a.pytorch_rev}^{{commit}}").strip()
    plugin_commit = git(a.pytorch, "ls-tree", pt_commit, "third_party/op-plugin").split()[2]
    plugin_ops, sparse, _ = op_plugin_ops(git(a.op_plugin, "show", f"{plugin_commit}:{OP_PLUGIN_PATH}"), a.version)
    own = native_ops(git(a.pytorch, "show", f"{pt_commit}:{NATIVE_PATH}"))
    ops: dict[str, str | None] = {name: plugin_ops[name] for name in sorted(plugin_ops)}
    for name in own:
        ops.setdefault(name, None)  # torch_npu's own registrations carry no version range
    wheel_only: list[str] = []
    if a.wheel:
        theirs, ours = wheel_ops(a.wheel), set(ops) | set(sparse)
        if ours - theirs:
            sys.stderr.write(f"{a.wheel} lacks {sorted(ours - theirs)}: these commits are not the wheel's\n")
            return 1
        # npu_* names are torch_npu's own operators (the npu namespace), not aten ones
        wheel_only = sorted(n for n in theirs - ours if not n.startswith("npu_"))
        for name in wheel_only:
            ops[name] = None
    table = {
        "torch_npu": a.version.lstrip("v") + ".0",
        "sources": [
            {"repo": PYTORCH_REPO, "ref": a.pytorch_rev, "commit": pt_commit, "path": NATIVE_PATH},
            {"repo": OP_PLUGIN_REPO, "ref": "submodule third_party/op-plugin of the above", "commit": plugin_commit,
             "path": OP_PLUGIN_PATH},
        ],
        "generated_by": "scripts/npu_op_table.py",
        "note": "ops: aten operator -> native since: the first op-plugin version of the unbroken run of versions ending at this one whose "
                "acl_op/op_api kernels cover the operator (op-plugin's version list begins at 2.1); null: "
                "registered by torch_npu itself (npu_native_functions.yaml) or found only in the wheel's generated list "
                "(wheel_only); sparse: operators with a kernel for sparse npu tensors only",
        "wheel": Path(a.wheel).name if a.wheel else None,
        "wheel_only": wheel_only,
        "sparse": sparse,
        "ops": ops,
    }
    json.dump(table, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
