"""The graph-replay oracle (opdb_oracles.py) on real CUDA, for the operators the emulated device refuses to
capture or replays differently: CUDA's own outcome per sample, to hold the device's against.

    CUDASHIM_DISABLE=1 python verification/opdb_graph_cuda.py OUT.json OP [OP ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import torch
    from opdb_cases import op_names, run_op, select_ops

    out, names = Path(sys.argv[1]), sys.argv[2:]
    table: dict[str, str] = {}
    details: dict[str, list[str]] = {}
    for op in select_ops(names):
        codes = []
        for case in run_op(op, "cuda", ["graph"], ["float32"], 4):
            codes.append(case.code)
            if case.code not in "=r":
                details.setdefault(op_names(op), []).append(f"#{case.sample} {case.code} {case.detail[:160]}")
        table[op_names(op)] = "".join(codes)
    out.write_text(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                               "graph_float32": table, "details": details}, indent=1) + "\n")


if __name__ == "__main__":
    main()
