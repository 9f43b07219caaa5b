"""The Ascend readiness report: every aten operator the program ran on the simulated NPU, with what a
real torch_npu does with it.

On with the migration report (`cudashim run --report`, CUDASHIM_REPORT) on the simulated NPU only:
a TorchDispatchMode sees each operator where the NPU's dispatch key would (below autograd; a composite
operator without an NPU kernel is decomposed into its parts, as it is on the NPU, also in inference mode) and notes, per operator and dtype, its
status (coverage.status: native since which torch_npu, composite, CPU fallback, fails; `fails` too
where a dtype check of torch_npu's own kernel refused the call, coverage.refusal, cited under
`dtype_check`), the dtype rule of torch_npu's documentation it meets (torch_npu_dtypes.json, reported
only), how often it ran, the first call site in user code, and the first error it raised. The report's JSON holds it under "npu_readiness";
stderr gets one summary line at exit. With the report off nothing here is loaded.

Triton kernels: every kernel the program launched on the simulated NPU (triton_route/ascend.py hands its
record over through `triton_source`), with its launches, largest grid, first call site, and "compiles for
Ascend": yes, no (the triton-ascend wheel's own reason), or not checked (the check is opt-in:
CUDASHIM_TRITON_ASCEND_COMPILE=1).
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path
from typing import Any

from .. import report
from ..emulated.npu import coverage

__all__ = ["install", "snapshot", "summary", "dtype_rule", "capture_refused", "CAPTURE_REFUSAL_MARK", "triton_source"]

_DTYPES_PATH = coverage.release_file("torch_npu_dtypes.json")
# (op, dtype) -> [status, since, calls, first call site, dtype rule or None, first error or None,
#                torch_npu's dtype check that refused it or None]
_seen: dict[tuple[str, str], list[Any]] = {}
_lock = threading.Lock()
_mode: Any = None
# first line of a graph-capture refusal -> [calls, first call site]
_refusals: dict[str, list[Any]] = {}
#: what every refusal the core raises inside a capture on the simulated NPU says (emulated/npu/graphs.py)
CAPTURE_REFUSAL_MARK = "captured into an NPU graph"
# () -> one dict per Triton kernel launched on the simulated NPU (triton_route/ascend.py's launches)
_triton: list[Any] = []


def triton_source(produce: Any) -> None:
    """Where the Triton kernels of the report come from (the simulated NPU's Triton launch check)."""
    _triton[:] = [produce]


@functools.lru_cache(maxsize=1)
def _dtype_rules() -> dict[str, Any]:
    return json.loads(_DTYPES_PATH.read_text())


def dtype_rule(op: str, dtypes: tuple[str, ...]) -> dict[str, Any] | None:
    """The documentation's rule that excludes one of `dtypes` for aten operator "name.overload", or None."""
    rule = _dtype_rules()["rules"].get(op.split(".")[0])
    if rule is None or not set(dtypes) & set(rule["refused"]):
        return None
    src = _dtype_rules()["source"]
    return {"api": rule["api"], "refused": sorted(set(dtypes) & set(rule["refused"])), "text": rule["text"],
            "source": f"{src['repo']}@{src['commit'][:10]}:{rule['doc']}"}


def _dtypes(args: Any, torch: Any) -> tuple[str, ...]:
    out: list[str] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.device.type == "npu":
                out.append(str(a.dtype).removeprefix("torch."))
        elif isinstance(a, (list, tuple)):
            out.extend(_dtypes(a, torch))
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=None)
def _implicit(name: str, overload: str) -> bool:
    import torch

    qualified = name + (f".{overload}" if overload else "")
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeImplicitAutograd"))


def _note(op: str, dtypes: tuple[str, ...], error: BaseException | None) -> None:
    key = (op, ",".join(dtypes))
    e = _seen.get(key)
    if e is None:
        status = coverage.status(op)
        with _lock:
            e = _seen.setdefault(key, [status, coverage.native_since(op)[1], 0,
                                       report.call_site() or "?", dtype_rule(op, dtypes), None, None])
    e[2] += 1
    if error is not None and e[5] is None:
        e[5] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if error is not None and e[6] is None:
        check = coverage.refusal(op, error)
        if check is not None:  # the NPU's kernel refuses these dtypes: the call fails there as here
            e[0], e[6] = "fails", check


def capture_refused(message: str) -> None:
    """An NPU graph capture refused a call (torch_npu's or CANN's refusal, emulated/npu/graphs.py): counted
    with the first call site in user code. A no-op while the report is off."""
    if _mode is None:
        return
    key = message.strip().splitlines()[0] if message.strip() else "?"
    with _lock:
        e = _refusals.setdefault(key, [0, report.call_site() or "?"])
        e[0] += 1


def install(torch: Any) -> None:
    """Watch this thread's operators from now on (the simulated torch_npu's import, when the report is on)."""
    global _mode
    if _mode is not None:
        return
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Readiness(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            schema = func._schema
            dtypes = _dtypes(args, torch) + _dtypes(kwargs.values(), torch)
            if not schema.name.startswith("aten::") or not dtypes:
                return func(*args, **kwargs)
            op = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
            if op not in coverage.table()["ops"] and _implicit(schema.name, schema.overload_name):
                # inference mode hands a composite operator to this mode whole; the NPU sees its parts
                with self:
                    out = func.decompose(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            try:
                out = func(*args, **kwargs)
            except BaseException as exc:
                _note(op, dtypes, exc)
                if CAPTURE_REFUSAL_MARK in str(exc):
                    capture_refused(str(exc))
                raise
            _note(op, dtypes, None)
            return out

    _mode = _Readiness()
    _mode.__enter__()
    report.add_section("npu_readiness", snapshot, summary)


def snapshot() -> dict[str, Any]:
    ops = [{"op": f"aten::{op}", "dtypes": dtypes, "status": e[0], "native_since": e[1], "calls": e[2],
            "first_call_site": e[3], "dtype_rule": e[4], "error": e[5], "dtype_check": e[6]}
           for (op, dtypes), e in sorted(_seen.items())]
    counts: dict[str, int] = {}
    for o in ops:
        counts[o["status"]] = counts.get(o["status"], 0) + 1
    t = coverage.table()
    return {"torch_npu": t["torch_npu"], "sources": t["sources"], "dtype_source": _dtype_rules()["source"],
            "dtype_check_sources": coverage.dtype_checks()["sources"],
            "summary": counts, "dtype_rules_met": sum(1 for o in ops if o["dtype_rule"]),
            "errors": sum(1 for o in ops if o["error"]), "ops": ops,
            "graph_capture_refusals": [{"refusal": k, "calls": e[0], "first_call_site": e[1]}
                                       for k, e in sorted(_refusals.items())],
            "triton_kernels": _triton[0]() if _triton else []}


def summary(data: dict[str, Any]) -> str:
    c = data["summary"]
    worst = [o for o in data["ops"] if o["status"] in ("fallback", "fails")]
    named = "; ".join(f"{o['op']} [{o['dtypes']}] {o['status']} x{o['calls']} at {o['first_call_site']}" for o in worst[:3])
    named += f" (+{len(worst) - 3} more)" if len(worst) > 3 else ""
    refusals = data.get("graph_capture_refusals", [])
    if refusals:
        r = refusals[0]
        named += ("; " if named else "") + (f"{sum(x['calls'] for x in refusals)} graph-capture refusal(s), first: "
                                             f"{r['refusal'][:120]} at {r['first_call_site']}")
    kernels = data.get("triton_kernels", [])
    if kernels:
        verdicts = [k["compiles_for_ascend"] for k in kernels]
        named += ("; " if named else "") + (
            f"{len(kernels)} Triton kernel(s): {verdicts.count('yes')} compile for Ascend, "
            f"{sum(v.startswith('no (') for v in verdicts)} do not, "
            f"{sum(v.startswith('not checked') for v in verdicts)} not checked")
    return (f"cudashim ascend readiness (simulated, torch_npu {data['torch_npu']}): {len(data['ops'])} operator/dtype "
            f"pairs ran: {c.get('native', 0)} native, {c.get('composite', 0)} composite, {c.get('fallback', 0)} CPU "
            f"fallback, {c.get('fails', 0)} fail; {data['dtype_rules_met']} outside the documented dtypes"
            + (f" -- {named}" if named else ""))
