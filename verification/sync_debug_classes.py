"""Which argument patterns of the partially synchronizing operators CUDA synchronizes on, measured on a GPU.

    CUDASHIM_DISABLE=1 python verification/sync_debug_classes.py                 # measure, write the results
    CUDASHIM_DISABLE=1 python verification/sync_debug_classes.py --update-table  # ... and the device's table

An operator such as index_put_ synchronizes for some arguments only (a boolean mask it must expand with
nonzero, a value on the host it must copy to the device) and not for others (a mask assigned a Python
scalar, which CUDA turns into masked_fill_). Each argument class below is one call, run on `cuda` under
`torch.cuda.set_sync_debug_mode("error")` with deterministic algorithms off and on: it synchronized when
it raised "called a synchronizing CUDA operation".

Written: benchmarks/results/sync_debug_classes.json (per class: synchronized, with deterministic
algorithms off and on). --update-table writes the classes into cudashim/emulated/synchronizing.json
("classes"), where the checks (tests/emulated/checks.py, `sync_class_*`) read CUDA's answer for each
class: they run on the emulated device in CI and on CUDA itself with the shim off.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "cudashim" / "emulated" / "synchronizing.json"
OUT = ROOT / "benchmarks" / "results" / "sync_debug_classes.json"


def classes(torch: Any) -> dict[str, tuple[str, Callable[[], Any]]]:
    """name -> (operator, a call of that argument class on fresh tensors of the current cuda device)."""
    dev = "cuda"

    def w() -> Any:
        return torch.zeros(8, 4, device=dev)

    rows = torch.tensor([True, False, True, False, True, False, True, False], device=dev)  # masks w's rows
    cols = torch.tensor([True, False, True, False], device=dev)  # masks w's second dimension
    full = torch.arange(32, device=dev).reshape(8, 4) % 3 == 0  # masks every element
    idx = torch.tensor([0, 2], device=dev)
    vals = torch.ones(2, 4, device=dev)
    row = torch.ones(4, device=dev)
    one_dev, one_host = torch.tensor(1.0, device=dev), torch.tensor(1.0)
    ones8 = torch.ones(8, dtype=torch.long, device=dev)

    def setitem(index: Any, value: Any) -> Callable[[], Any]:
        def call() -> Any:
            t = w()
            t[index] = value
            return t
        return call

    def put(index: tuple[Any, ...], value: Any, accumulate: bool) -> Callable[[], Any]:
        return lambda: w().index_put_(index, value, accumulate=accumulate)

    return {
        # index_put_: a boolean mask
        "index_put_mask_python_scalar": ("aten::index_put_", setitem(full, 0.0)),
        "index_put_row_mask_python_scalar": ("aten::index_put_", setitem(rows, 0.0)),
        "index_put_mask_after_slice_python_scalar": ("aten::index_put_", setitem((slice(None), cols), 0.0)),
        "index_put_uint8_mask_python_scalar": ("aten::index_put_", setitem(full.to(torch.uint8), 0.0)),
        "index_put_mask_host_scalar_tensor": ("aten::index_put_", setitem(full, one_host)),
        "index_put_mask_device_scalar_tensor": ("aten::index_put_", setitem(full, one_dev)),
        "index_put_row_mask_device_values": ("aten::index_put_", put((rows,), row, False)),
        "index_put_mask_accumulate_device_scalar": ("aten::index_put_", put((full,), one_dev, True)),
        "index_put_mask_accumulate_host_scalar": ("aten::index_put_", put((full,), one_host, True)),
        "index_put_row_mask_and_integer_python_scalar": (
            "aten::index_put_", setitem((rows, torch.tensor([0, 1, 3, 2], device=dev)), 0.0)),
        # index_put_: integer indices
        "index_put_integer_python_scalar": ("aten::index_put_", setitem(idx, 0.0)),
        "index_put_integer_host_scalar_tensor": ("aten::index_put_", setitem(idx, one_host)),
        "index_put_integer_device_scalar_tensor": ("aten::index_put_", setitem(idx, one_dev)),
        "index_put_integer_device_values": ("aten::index_put_", setitem(idx, vals)),
        "index_put_integer_accumulate_device_values": ("aten::index_put_", put((idx,), vals, True)),
        "index_put_integer_accumulate_host_scalar": ("aten::index_put_", put((idx,), one_host, True)),
        "index_put_host_integer_device_values": ("aten::index_put_", setitem(idx.cpu(), vals)),
        # out-of-place index_put
        "index_put_out_of_place_mask_host_scalar": ("aten::index_put", lambda: w().index_put((full,), one_host)),
        "index_put_out_of_place_integer_device_values": ("aten::index_put", lambda: w().index_put((idx,), vals)),
        # index: reading
        "index_mask": ("aten::index.Tensor", lambda: w()[full]),
        "index_row_mask": ("aten::index.Tensor", lambda: w()[rows]),
        "index_integer": ("aten::index.Tensor", lambda: w()[idx]),
        "index_host_integer": ("aten::index.Tensor", lambda: w()[idx.cpu()]),
        # masked_fill, index_fill: a value read back with item() when it is on the device
        "masked_fill_python_scalar": ("aten::masked_fill.Scalar", lambda: w().masked_fill(full, 1.0)),
        "masked_fill_device_scalar_tensor": ("aten::masked_fill.Tensor", lambda: w().masked_fill(full, one_dev)),
        "masked_fill_host_scalar_tensor": ("aten::masked_fill.Tensor", lambda: w().masked_fill(full, one_host)),
        "index_fill_device_scalar_tensor": ("aten::index_fill.int_Tensor", lambda: w().index_fill(0, idx, one_dev)),
        "index_fill_host_scalar_tensor": ("aten::index_fill.int_Tensor", lambda: w().index_fill(0, idx, one_host)),
        # repeat_interleave: the output's size read back unless given
        "repeat_interleave_without_output_size": (
            "aten::repeat_interleave.Tensor", lambda: torch.repeat_interleave(w()[:, 0], ones8)),
        "repeat_interleave_with_output_size": (
            "aten::repeat_interleave.Tensor",
            lambda: torch.repeat_interleave(w()[:, 0], ones8, output_size=8)),
    }


def synchronizes(torch: Any, fn: Callable[[], Any], deterministic: bool) -> bool:
    """Whether fn() raises CUDA's sync-debug error under mode "error" (deterministic algorithms as given)."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.cuda.synchronize()
    torch.use_deterministic_algorithms(deterministic)
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
        return False
    except RuntimeError as e:
        if "synchroniz" not in str(e):
            raise
        return True
    finally:
        torch.cuda.set_sync_debug_mode(0)
        torch.use_deterministic_algorithms(was)


def measure() -> dict[str, Any]:
    import torch

    warnings.filterwarnings("ignore")
    out = {}
    for name, (op, fn) in classes(torch).items():
        try:
            out[name] = {"operator": op, "synchronized": synchronizes(torch, fn, False),
                         "synchronized_deterministic": synchronizes(torch, fn, True)}
        except Exception as e:  # noqa: BLE001 - a class CUDA refuses is reported, not measured
            out[name] = {"operator": op, "error": f"{type(e).__name__}: {str(e)[:200]}"}
    return {"command": " ".join(sys.argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "classes": out}


def update_table(result: dict[str, Any]) -> dict[str, Any]:
    table = json.loads(TABLE.read_text())
    table["classes_source"] = (f"measured on {result['gpu']} with torch {result['torch']} "
                               "(verification/sync_debug_classes.py)")
    table["classes"] = {name: {"operator": r["operator"], "synchronizes": r["synchronized"],
                               **({"synchronizes_deterministic": r["synchronized_deterministic"]}
                                  if r["synchronized_deterministic"] != r["synchronized"] else {})}
                        for name, r in result["classes"].items() if "error" not in r}
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--from", dest="source", type=Path, default=None, help="a measured result: no GPU needed")
    ap.add_argument("--update-table", action="store_true", help=f"write the classes into {TABLE.relative_to(ROOT)}")
    a = ap.parse_args(argv)
    if a.source is not None:
        result = json.loads(a.source.read_text())
    else:
        import torch

        if not torch.cuda.is_available():
            print("needs a CUDA GPU and no shim: CUDASHIM_DISABLE=1 python verification/sync_debug_classes.py",
                  file=sys.stderr)
            return 2
        result = measure()
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, r in result["classes"].items():
        if "error" in r:
            print(f"{name:50} error: {r['error']}")
            continue
        print(f"{name:50} {'sync' if r['synchronized'] else '-':5} {'sync' if r['synchronized_deterministic'] else '-'}")
    if a.update_table:
        TABLE.write_text(json.dumps(update_table(result), indent=1) + "\n")
        print(f"written: {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
