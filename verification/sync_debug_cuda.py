"""Which aten operators CUDA synchronizes on, measured on a real GPU over PyTorch's operator database.

    CUDASHIM_DISABLE=1 python verification/sync_debug_cuda.py                     # measure, write the results
    CUDASHIM_DISABLE=1 python verification/sync_debug_cuda.py --update-table      # ... and the device's table
    python verification/sync_debug_cuda.py --from part1.json part2.json --update-table  # merge parts, no GPU

Every OpInfo of `op_db` runs its sample inputs (a few dtypes, forward and backward) on `cuda` under a
TorchDispatchMode that calls each aten operator once with `torch.cuda.set_sync_debug_mode("error")`:
an operator that raises "called a synchronizing CUDA operation" is recorded and then run again with the
mode off, so the sample carries on to its later operators. What the mode sees are the operators below
autograd and composites: the ones the emulated device's dispatch key sees.

Written: benchmarks/results/sync_debug_cuda.json (torch, GPU, per operator: samples that synchronized
and samples that ran). --update-table rewrites cudashim/emulated/synchronizing.json, the table the
emulated device enforces: an operator that synchronized on every sample becomes `always`; one that did
on some, or on none while the table names it, keeps its condition from the current table (a condition
is written by a person: `none:ARG`, `bool:ARG`, `device:ARG`; indexing with a mask synchronizes in its
nonzero, which the device runs inside the CPU's indexing kernel, so the table names indexing itself);
one that synchronized on some samples and is not in the table is listed under `review` (not enforced)
for a person to write its condition. Measuring needs a GPU and no shim (CUDASHIM_DISABLE=1); several
measured parts (`--ops` subsets run at once) are merged with `--from`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "cudashim" / "emulated" / "synchronizing.json"
# operators the emulated device implements itself: their own kernels decide (kernels.cpp)
OWN = {"aten::_local_scalar_dense", "aten::copy_", "aten::_to_copy", "aten::item"}


def measure(patterns: list[str], samples: int, dtypes: list[str]) -> dict[str, Any]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from opdb_cases import op_names, select_ops

    seen: dict[str, dict[str, Any]] = {}

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = f"aten::{func._schema.name.split('::')[-1]}" + (f".{func._overloadname}" if func._overloadname != "default" else "")
            rec = seen.setdefault(name, {"ran": 0, "synchronized": 0, "ops": set()})
            rec["ran"] += 1
            rec["ops"].add(current[0])
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                return func(*args, **kwargs)
            except RuntimeError as e:
                if "synchroniz" not in str(e):
                    raise
                rec["synchronized"] += 1
            finally:
                torch.cuda.set_sync_debug_mode(0)
            return func(*args, **kwargs)

    current = [""]
    warnings.filterwarnings("ignore")
    for op in select_ops(patterns):
        current[0] = op_names(op)
        names = [d for d in sorted(op.supported_dtypes("cuda"), key=str) if not dtypes or str(d)[6:] in dtypes]
        for dtype in names[:3] if not dtypes else names:
            for grad in (False, True):
                if grad and not (op.supports_autograd and dtype in op.supported_backward_dtypes("cuda")):
                    continue
                try:
                    gen = list(op.sample_inputs("cuda", dtype, requires_grad=grad))[:samples]
                except Exception:  # noqa: BLE001 - an op whose samples cannot be built here is skipped
                    continue
                for s in gen:
                    try:
                        with Probe():
                            out = op(s.input, *s.args, **s.kwargs)
                            if grad:
                                outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
                                ins = [t for t in tree_leaves((s.input, s.args, s.kwargs))
                                       if isinstance(t, torch.Tensor) and t.requires_grad]
                                if outs and ins:
                                    torch.autograd.grad([o.sum().abs() for o in outs], ins, allow_unused=True)
                    except Exception:  # noqa: BLE001 - the op's own failure; its operators were still probed
                        pass
                    torch.cuda.set_sync_debug_mode(0)
        print(current[0], file=sys.stderr)
    ops = {n: {"ran": r["ran"], "synchronized": r["synchronized"], "by": sorted(r["ops"])[:5]}
           for n, r in sorted(seen.items())}
    return {
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "ops": ops,
    }


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from parts measured at once over disjoint operator subsets (same GPU and torch)."""
    ops: dict[str, dict[str, Any]] = {}
    for part in parts:
        for name, r in part["ops"].items():
            o = ops.setdefault(name, {"ran": 0, "synchronized": 0, "by": []})
            o["ran"] += r["ran"]
            o["synchronized"] += r["synchronized"]
            o["by"] = sorted(set(o["by"]) | set(r["by"]))[:5]
    first = parts[0]
    return {"command": " ; ".join(p["command"] for p in parts), "date": first["date"], "host": first["host"],
            "torch": first["torch"], "gpu": first["gpu"], "ops": dict(sorted(ops.items()))}


def summarise(result: dict[str, Any], table: dict[str, Any]) -> None:
    """The figures and table the docs quote (scripts/docs.py renders them)."""
    synced = {n: r for n, r in result["ops"].items() if r["synchronized"]}
    result["host"] = {"gpu": result["gpu"], "torch": result["torch"]}
    result["figures"] = {"operators reached": len(result["ops"]), "operators that synchronized": len(synced)}
    rules = {**table.get("ops", {}), **{n: "review (not enforced)" for n in table.get("review", {})}}
    result["table"] = {"columns": ["operator", "synchronized / calls", "reached by (OpInfos)", "the device's rule"],
                       "rows": [[n, f"{r['synchronized']} / {r['ran']}", r["by"][:3],
                                 "its own kernel" if n in OWN else rules.get(n, "-")] for n, r in synced.items()]}


def update_table(result: dict[str, Any]) -> dict[str, Any]:
    old = json.loads(TABLE.read_text())
    table, review = {}, {}
    for name, r in result["ops"].items():
        if not r["synchronized"] or name in OWN or name in old["ops"]:
            continue
        if r["synchronized"] == r["ran"]:
            table[name] = "always"
        else:
            review[name] = f"synchronized on {r['synchronized']} of {r['ran']} calls"
    table.update(old["ops"])
    return {"about": old["about"], "source": f"measured on {result['gpu']} with torch {result['torch']} "
            "(verification/sync_debug_cuda.py)", "ops": table, "review": review}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="*", default=[], help="fnmatch patterns over OpInfo names")
    ap.add_argument("--samples", type=int, default=8, help="sample inputs per op, dtype and pass")
    ap.add_argument("--dtypes", nargs="*", default=[], help="dtype names; the first three the op supports when absent")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sync_debug_cuda.json")
    ap.add_argument("--from", dest="parts", nargs="+", type=Path, default=[],
                    help="merge these measured results instead of measuring")
    ap.add_argument("--update-table", action="store_true", help=f"rewrite {TABLE.relative_to(ROOT)}")
    a = ap.parse_args(argv)
    if a.parts:
        result = merge([json.loads(p.read_text()) for p in a.parts])
    else:
        import torch

        if not torch.cuda.is_available():
            print("needs a CUDA GPU and no shim: CUDASHIM_DISABLE=1 python verification/sync_debug_cuda.py", file=sys.stderr)
            return 2
        result = measure(a.ops, a.samples, a.dtypes)
    summarise(result, json.loads(TABLE.read_text()))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    synced = {n: r for n, r in result["ops"].items() if r["synchronized"]}
    print(f"{len(synced)} of {len(result['ops'])} operators synchronized; written: {a.out}")
    if a.update_table:
        TABLE.write_text(json.dumps(update_table(result), indent=1) + "\n")
        print(f"written: {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
