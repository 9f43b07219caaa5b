"""Generate the simulated NPU's dtype rules from torch_npu's documentation of the PyTorch APIs it supports.

Ascend/pytorch documents, per PyTorch version, every native API on the NPU
(docs/zh/api/native_api/pytorch_2-13-0/*.md): a `### <api>` section whose "限制与说明" (limits) lines say
which dtypes an argument takes ("`input`仅支持bf16，fp16，fp32" = only these) or which it does not
("不支持double数据类型" = no float64). A line naming a product (<term>…</term>) applies to that product
only; the simulated NPU is a 910B (Atlas A2), so lines naming only other products are skipped.

Each rule is mapped to the aten operator the API dispatches to (torch.X / Tensor.X / torch.nn.functional.X
-> aten::X, torch.special.X -> aten::special_X, torch.linalg.X -> aten::linalg_X, torch.fft.X -> aten::fft_X)
when that operator exists and has the argument; the rest are listed as unmapped. Needs torch.

Usage: python scripts/npu_dtype_rules.py --pytorch DIR [--rev REV] > cudashim/emulated/npu/torch_npu_dtypes.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from typing import Any

DOCS = "docs/zh/api/native_api/pytorch_2-13-0"
REV = "v26.2.0-beta.1-pytorch2.13.0"
#: the documentation's dtype names -> torch's; the dtypes its lists range over
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64", "double": "float64",
          "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool",
          "complex64": "complex64", "complex128": "complex128"}
STANDARD = sorted(set(DTYPES.values()))
_ONLY = re.compile(r"`(\w+)`仅支持([A-Za-z0-9，, ]+)")
_NOT = re.compile(r"不支持((?:double|fp64|complex64|complex128|[，, ])+)")
_PREFIX = {"torch.special.": "special_", "torch.linalg.": "linalg_", "torch.fft.": "fft_",
           "torch.nn.functional.": "", "torch.Tensor.": "", "Tensor.": "", "torch.": ""}


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True, text=True).stdout


def _dtypes(listed: str) -> set[str]:
    return {DTYPES[t.strip()] for t in re.split(r"[，,]", listed) if t.strip() in DTYPES}


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(api, its limit lines that apply to a 910B) per `### api` section."""
    out: list[tuple[str, list[str]]] = []
    api, lines, in_limits = None, [], False
    for line in text.splitlines():
        if line.startswith("### "):
            if api and lines:
                out.append((api, lines))
            heading = re.sub(r"<[^>]+>", "", line[4:]).strip()
            api = None if heading.startswith("class ") else heading.split("(")[0].strip()
            lines, in_limits = [], False
        elif "限制与说明" in line:
            in_limits = True
            lines.extend(_applies(line))
        elif in_limits and line.startswith("</div>"):
            in_limits = False
        elif in_limits:
            lines.extend(_applies(line))
    if api and lines:
        out.append((api, lines))
    return out


def _applies(line: str) -> list[str]:
    terms = re.findall(r"<term>([^<]+)</term>", line)
    return [line.strip()] if not terms or any("Atlas A2" in t for t in terms) else []


def rule(lines: list[str]) -> tuple[str, list[str], str] | None:
    """(argument or "*", refused dtypes, the line) of the first dtype limit in a section."""
    for line in lines:
        m = _ONLY.search(line)
        if m:
            allowed = _dtypes(m.group(2))
            if allowed:
                return m.group(1), sorted(set(STANDARD) - allowed), line
        m = _NOT.search(line)
        if m and _dtypes(m.group(1)):
            return "*", sorted(_dtypes(m.group(1))), line
    return None


def aten_for(api: str, arg: str) -> tuple[str, str] | None:
    """(aten operator base name, its argument) an API's rule applies to, or None."""
    import torch

    for prefix, aten_prefix in _PREFIX.items():
        if api.startswith(prefix):
            name = aten_prefix + api[len(prefix):]
            break
    else:
        return None
    if "." in name:
        return None
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    if not schemas:
        return None
    args = {a.name for s in schemas for a in s.arguments}
    if arg == "*":
        return name, "*"
    if arg in args:
        return name, arg
    if arg in ("input", "tensor") and "self" in args:
        return name, "self"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pytorch", required=True, help="git directory of Ascend/pytorch")
    p.add_argument("--rev", default=REV)
    a = p.parse_args(argv)
    commit = git(a.pytorch, "rev-parse", f"{a.rev}^{{commit}}").strip()
    files = sorted(f for f in git(a.pytorch, "ls-tree", "--name-only", f"{commit}", f"{DOCS}/").split() if f.endswith(".md"))
    rules: dict[str, dict[str, Any]] = {}
    unmapped: list[str] = []
    for path in files:
        for api, lines in sections(git(a.pytorch, "show", f"{commit}:{path}")):
            found = rule(lines)
            if found is None:
                continue
            arg, refused, text = found
            if not refused:
                continue
            target = aten_for(api, arg)
            if target is None:
                unmapped.append(api)
                continue
            op, aten_arg = target
            rules.setdefault(op, {"arg": aten_arg, "refused": refused, "api": api, "doc": path, "text": text})
    json.dump({"torch_npu": "2.13.0", "source": {"repo": "Ascend/pytorch", "ref": a.rev, "commit": commit, "path": DOCS},
               "generated_by": "scripts/npu_dtype_rules.py",
               "note": "rules: aten operator (every overload) -> the argument ('*': every tensor argument) whose dtype "
                       "the documentation excludes, the dtypes refused, and the documentation's line",
               "rules": rules, "unmapped": sorted(set(unmapped))}, sys.stdout, indent=0, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
