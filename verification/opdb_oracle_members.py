"""The members the graph-replay and meta-agreement oracles found (opdb_oracles.py), each with its reason.

    python verification/opdb_oracle_members.py benchmarks/results/opdb_graph_meta_cuda.json   # -> results/opdb_oracle_members.json
    python verification/opdb_oracle_members.py --check benchmarks/results/opdb_graph_meta_cuda.json

Every case of a sweep with --modes graph meta that is not equal is a member of one of two classes: work the
device did at capture instead of recording it for replay (graph), or a device output that differs from
what the operator's meta function promises (meta). Each is fixed (and then no longer in the sweep) or
listed here with the reason it stays; --check fails naming any member without one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# (mode, code, op name prefixes or "*") -> why the case stays as it is
REASONS: list[tuple[str, str, tuple[str, ...], str]] = [
    ("graph", "g", ("*",),
     "refused with CUDA's capture error: the device's kernel synchronizes (a shape that depends on the "
     "data, or a value read on the host); real CUDA's outcome for the same samples is what "
     "verification/opdb_graph_cuda.py asks of a GPU"),
    ("graph", "D", ("sparse.",),
     "a sparse result: the device cannot replay it into the sparse tensor the capture returned and says so "
     "at replay (capture dense tensors)"),
    ("meta", "m", ("native_batch_norm", "_native_batch_norm_legit", "nn.functional.batch_norm",
                   "nn.functional.instance_norm"),
     "eval-mode batch norm: the CPU kernel returns empty save_mean/save_invstd where the meta function "
     "promises (C,); Inductor decomposes native_batch_norm, so no compiled program asserts on them"),
    ("meta", "m", ("nn.functional.logsigmoid", "nn.functional.multilabel_soft_margin_loss"),
     "log_sigmoid_forward's buffer: the CPU kernel fills one of the input's shape, CUDA's (and the meta "
     "function) none; Inductor decomposes log_sigmoid_forward, and the CPU backward needs the buffer"),
    ("meta", "m", ("nn.functional.embedding_bag",),
     "_embedding_bag_forward_only's auxiliary outputs (offset2bag, bag_size) are the CPU kernel's; its "
     "backward reads them in the CPU's layout"),
]


def reason(op: str, mode: str, code: str) -> str | None:
    for m, c, prefixes, why in REASONS:
        if m == mode and c == code and any(p == "*" or op.startswith(p) for p in prefixes):
            return why
    return None


def members(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in sweep["not_equal"]:
        if r["mode"] not in ("graph", "meta") or r["code"] in ("=", "r", "e", "s"):
            continue
        key = (r["op"], r["mode"], r["code"])
        row = rows.setdefault(key, {"op": r["op"], "mode": r["mode"], "code": r["code"], "cases": 0,
                                    "detail": r["detail"][:240], "reason": reason(*key)})
        row["cases"] += 1
    return sorted(rows.values(), key=lambda x: (x["mode"], x["code"], x["op"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    sweep = json.loads(a.sweep.read_text())
    found = members(sweep)
    missing = [f"{m['op']} {m['mode']} {m['code']}: {m['detail']}" for m in found if m["reason"] is None]
    if missing:
        print("members without a reason:\n" + "\n".join(missing), file=sys.stderr)
        return 1
    if a.check:
        return 0
    out = HERE.parent / "benchmarks" / "results" / "opdb_oracle_members.json"
    summary = sweep["summary"]
    out.write_text(json.dumps({
        "name": "opdb_oracle_members", "date": sweep.get("date"), "commit": sweep.get("commit"),
        "host": {"cpu": sweep.get("host"), "torch": sweep.get("torch")}, "command": f"python verification/opdb_oracle_members.py {a.sweep}",
        "figures": {f"{mode}: {k}": v for mode in ("graph", "meta") if mode in summary
                    for k, v in (("cases", summary[mode]["cases"]), ("share equal", summary[mode]["equal_share"]))},
        "note": "Each row: an operator the sweep found with a case not equal, and why it stays. Codes as in "
                "verification/opdb_cases.py (g: capture refused with CUDA's capture error; m: an output not as its "
                "meta function promises).",
        "table": {"columns": ["operator", "oracle", "code", "cases", "reason"],
                  "rows": [[m["op"], m["mode"], m["code"], m["cases"], m["reason"]] for m in found]},
    }, indent=1) + "\n")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
