"""Generate the aten operators torch_npu runs on sparse COO npu tensors (its SparsePrivateUse1 kernels).

torch_npu registers them in torch_npu/csrc/aten/RegisterSparseNPU.cpp, generated from torch's
native_functions.yaml: the operators whose SparseCUDA kernel is one of torch's device-generic native
functions (new_with_dims_and_tensor_sparse, add_sparse, _to_dense's sparse_to_dense, ...), which it
registers for its own device. Which of them the wheel registers is read from the wheel's native library
itself: the torch native functions libtorch_npu.so calls (its undefined `at::native::*` symbols),
matched against the SparseCUDA entries of the installed torch's native_functions.yaml (torchgen's copy).

Usage (the wheel from the cache scripts/install fills; needs binutils' `nm`):

    python scripts/npu_sparse_table.py --wheel WHEEL > cudashim/emulated/npu/releases/<release>/torch_npu_sparse.json

torch_npu's op-plugin kernels for sparse tensors (the table's `sparse` list, scripts/npu_op_table.py)
come on top of these.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

_LIB = "torch_npu/lib/libtorch_npu.so"


def native_symbols(wheel: Path) -> set[str]:
    """The at::native functions the wheel's native library calls (undefined there: torch defines them)."""
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        lib = Path(tmp) / "libtorch_npu.so"
        lib.write_bytes(zf.read(_LIB))
        out = subprocess.run(["nm", "-DC", "--undefined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\bat::native::([A-Za-z0-9_]+)\(", out))


def sparse_operators(symbols: set[str]) -> list[str]:
    import torchgen

    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    ops = set()
    for entry in yaml.safe_load(path.read_text()):
        for keys, fn in (entry.get("dispatch") or {}).items():
            if "SparseCUDA" in {k.strip() for k in keys.split(",")} and fn in symbols:
                ops.add(entry["func"].split("(", 1)[0])
    return sorted(ops)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, required=True, help="the torch-npu wheel (its libtorch_npu.so is read)")
    args = ap.parse_args()
    ops = sparse_operators(native_symbols(args.wheel))
    if not ops:
        print(f"{args.wheel}: no sparse registration found; is it a torch-npu wheel?", file=sys.stderr)
        return 1
    json.dump({"generated_by": f"scripts/npu_sparse_table.py --wheel {os.path.basename(args.wheel)}",
               "note": "aten operators torch_npu registers for sparse COO npu tensors (SparsePrivateUse1): those "
                       "whose SparseCUDA kernel is a device-generic torch native function the wheel's "
                       "libtorch_npu.so calls",
               "ops": ops}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
