"""The op_db sweep of the emulated device on two torch builds, side by side, over the cases both ran.

    python verification/opdb_versions.py benchmarks/results/opdb_cuda.json benchmarks/results/opdb_cuda_torch2.15.json

A sweep on another torch (e.g. `--samples 2 --ops ...` on 2.15's CUDA build, opdb_sweep.py) usually runs
fewer cases than the pinned torch's full sweep; this counts each file's outcome codes (opdb_cases.py)
over the cases both hold (the same OpInfo, dtype and mode, their first samples) and writes both summaries
to benchmarks/results/opdb_cuda_versions.json, with the cells whose codes differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "benchmarks")]  # _results: the one writer of results files
from _results import record  # noqa: E402

__all__ = ["compare"]


def _count(codes: str, into: dict[str, Any]) -> None:
    for c in codes:
        if c == "s":
            continue
        into["cases"] += 1
        into["codes"][c] = into["codes"].get(c, 0) + 1


def compare(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    sums: dict[str, dict[str, Any]] = {"base": {}, "other": {}}
    differ = []
    for op, dtypes in other["table"].items():
        for dtype, modes in dtypes.items():
            for mode, codes in modes.items():
                base_codes = base["table"].get(op, {}).get(dtype, {}).get(mode)
                if base_codes is None:
                    continue
                n = min(len(codes), len(base_codes))
                for side, c in (("base", base_codes[:n]), ("other", codes[:n])):
                    _count(c, sums[side].setdefault(mode, {"cases": 0, "codes": {}}))
                if base_codes[:n] != codes[:n]:
                    differ.append({"op": op, "dtype": dtype, "mode": mode, "base": base_codes[:n], "other": codes[:n]})
    for side in sums.values():
        for m in side.values():
            ok = sum(m["codes"].get(c, 0) for c in "=rcn")
            m["equal_share"] = round(ok / m["cases"], 5) if m["cases"] else None
    return {"base": {"torch": base.get("torch"), "file_command": base.get("command"), "summary": sums["base"]},
            "other": {"torch": other.get("torch"), "file_command": other.get("command"), "summary": sums["other"]},
            "ops": len(other["table"]), "cells_differ": differ}


def main(argv: list[str]) -> int:
    base, other = (json.loads(Path(p).read_text()) for p in argv[:2])
    figures = compare(base, other)
    record("opdb_cuda_versions", figures, note=f"{argv[0]} against {argv[1]}, over the cases both ran")
    print(json.dumps({k: v["summary"] for k, v in figures.items() if k in ("base", "other")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
