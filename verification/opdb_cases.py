"""PyTorch's operator database (`op_db`) as the oracle of a device: each OpInfo's sample inputs run on the
device and on CPU tensors in the same process, and what comes back is compared.

The CPU's own result is the oracle. A device whose kernels are the CPU's (the emulated CUDA device, the
simulated NPU) must give the same bits, dtypes and shapes, raise the same exception types, and raise the
exception type an OpInfo's `error_inputs` declare. Used by `opdb_sweep.py` (the sweep, in subprocess
chunks) and by the test that runs a fixed slice of it.

Each case gets one outcome code (`CODES`); a case is equal only for `=`.
"""

from __future__ import annotations

import fnmatch
import math
import re
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from opdb_oracles import GRAPH_CODES, META_CODES, graph_case, meta_case

__all__ = ["CODES", "Case", "op_names", "select_ops", "run_op", "summarize"]

# the error-code line torch_npu appends to its own refusals (formatErrorCode: "ERR01002 OPS invalid type");
# the simulated NPU writes it as torch_npu does
_NPU_REFUSAL = re.compile(r"\) ERR\d{5} (OPS|PTA) ")
# sparse CSR tensors: torch_npu registers no fallback for the SparseCsrPrivateUse1 key (its boxed fallbacks
# are PrivateUse1's and SparsePrivateUse1's, torch_npu/csrc/aten/VariableFallbackKernel.cpp) and kernels
# for two operators only (torch_npu/csrc/aten/ops/SparseCsrReductionFallbackKernelNpu.cpp): any other
# operator on a CSR tensor is the dispatcher's NotImplementedError on an NPU as on the simulated one
_NPU_NO_CSR_KERNEL = re.compile(r"Could not run 'aten::(?!_sparse_csr_sum|_sparse_csr_prod)[\w.]+' with arguments "
                                r"from the 'SparseCsrnpu' backend")

CODES = {
    "=": "equal: same bits, dtype and shape (or the same exception type on both)",
    "~": "close: within torch.testing.assert_close's default tolerance, not bitwise",
    "x": "differ: values beyond tolerance",
    "m": "meta: dtype, shape, layout or device of an output differs",
    "D": "the device raised, the CPU did not",
    "n": "the simulated NPU refused as torch_npu refuses where the CPU runs the call: its own code's refusals "
         "(a dtype check of its kernel, cited in cudashim/emulated/npu/torch_npu_dtype_checks.json; its "
         "sparse fallback), with its error code in the message, or an operator on a sparse CSR tensor, for "
         "which torch_npu registers no kernel: the NPU's outcome, not the CPU's (counted as equal)",
    "C": "the CPU raised, the device did not",
    "T": "both raised, different exception types",
    "M": "error input: the device did not raise",
    "W": "error input: the device raised another exception type than declared",
    "c": "error input: the device does with it what the CPU does (the same exception type, or neither raises), "
         "not what the OpInfo declares for CUDA (counted as equal: the CPU is the oracle)",
    "r": "random: the op draws random numbers (outcome is its shape and dtype only)",
    "s": "skipped: the sample could not be built or moved",
    **GRAPH_CODES,
    **META_CODES,
}


@dataclass
class Case:
    op: str
    dtype: str
    mode: str  # forward | backward | error | sparse
    sample: int
    code: str
    detail: str = ""

    def row(self) -> dict[str, Any]:
        return {"op": self.op, "dtype": self.dtype, "mode": self.mode, "sample": self.sample, "code": self.code,
                "detail": self.detail}


@dataclass
class _Result:
    value: Any = None
    error: BaseException | None = None
    trace: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def op_names(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def select_ops(patterns: Iterable[str] | None = None) -> list[Any]:
    """The OpInfos whose full name (`name.variant`) matches any of the fnmatch patterns (all without)."""
    from torch.testing._internal.common_methods_invocations import op_db

    pats = list(patterns or [])
    return [op for op in op_db if not pats or any(fnmatch.fnmatchcase(op_names(op), p) for p in pats)]


# ops whose result depends on random numbers: the device draws from its own generator
_RANDOM = ("bernoulli", "normal", "rand", "randn", "randint", "multinomial", "dropout", "uniform", "exponential",
           "geometric", "cauchy", "log_normal", "rrelu", "randperm", "empty", "new_empty", "alpha_dropout",
           "feature_alpha_dropout", "gumbel_softmax", "poisson")


def _random(op: Any) -> bool:
    name = op.name.split(".")[-1]
    return any(name == r or name.startswith(r + "_") or name.endswith("_" + r) for r in _RANDOM) or \
        "empty" in op.name or "dropout" in op.name


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def _placement(cpu: Any, dev: Any, device: str) -> list[bool] | None:
    """Per leaf of a sample built for the CPU: whether the same sample built for `device` holds it on the
    device. A generator may keep some tensors on the host whatever device it builds for (tensor_split's
    index tensor, which CUDA too wants there): those stay on the host. None when the two differ in shape."""
    import torch
    from torch.utils._pytree import tree_flatten

    if dev is None:
        return None
    a, sa = tree_flatten((cpu.input, cpu.args, cpu.kwargs))
    b, sb = tree_flatten((dev.input, dev.args, dev.kwargs))
    if sa != sb or len(a) != len(b):
        return None
    on = []
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            on.append(isinstance(y, torch.Tensor) and y.device.type == device)
        else:  # a device argument: `device` only where the device's sample names it
            on.append(not (isinstance(x, (str, torch.device)) and str(x) == "cpu" and str(y) == "cpu"))
    return on


def _move(x: Any, device: str, rg: bool = True, where: list[bool] | None = None) -> Any:
    """A copy of every tensor in x on `device`, with the same strides, as a leaf keeping requires_grad;
    `where`, per leaf of x: False keeps that leaf on the CPU. Tensors that share memory in x share it in
    the copy (an error input may be about exactly that: an out= argument overlapping an input)."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    leaves, spec = tree_flatten(x)
    if where is None or len(where) != len(leaves):
        where = [True] * len(leaves)
    seen: dict[Any, int] = {}
    for t in leaves:
        if _plain_strided(t):
            key = (t.device, t.untyped_storage().data_ptr())
            seen[key] = seen.get(key, 0) + 1
    shared: dict[Any, Any] = {}
    moved = [_leaf(t, device if w else "cpu", rg, seen, shared) for t, w in zip(leaves, where)]
    return tree_unflatten(moved, spec)


def _plain_strided(t: Any) -> bool:
    import torch

    return isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_quantized and not t.is_nested


def _leaf(t: Any, device: str, rg: bool, seen: dict[Any, int], shared: dict[Any, Any]) -> Any:
    import torch

    if _plain_strided(t) and seen.get((t.device, t.untyped_storage().data_ptr()), 0) > 1 \
            and t.untyped_storage().data_ptr() != 0:
        key = (t.device, t.untyped_storage().data_ptr(), device)
        with torch.no_grad():
            if key not in shared:
                st = t.untyped_storage()
                whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)
                shared[key] = torch.empty(st.nbytes(), dtype=torch.uint8, device=device).copy_(whole)
            out = torch.empty(0, dtype=t.dtype, device=device).set_(shared[key].untyped_storage(), t.storage_offset(),
                                                                    t.size(), t.stride())
        if rg and t.requires_grad:
            out.requires_grad_(True)
        return out
    if isinstance(t, torch.Tensor):
        if _plain_strided(t):
            out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
            with torch.no_grad():
                out.copy_(t.detach())
        else:
            out = t.detach().to(device)
        if rg and t.requires_grad:
            out.requires_grad_(True)
        return out
    if isinstance(t, torch.device) and t.type == "cpu":
        return torch.device(device)
    if isinstance(t, str) and t == "cpu":  # a device argument
        return device
    return t


def _names_device(x: Any, device: str) -> bool:
    """Whether an operator called with x makes its outputs on `device`: a device it names (`device=`)
    decides; without one, a tensor on the device does (`zeros_like(t, device="cpu")` makes a CPU
    tensor of a device tensor, `arange(2)` a CPU tensor)."""
    import torch

    named = [str(t).split(":")[0] for t in _leaves(x) if isinstance(t, (torch.device, str))]
    named = [n for n in named if n in ("cpu", device)]
    if named:
        return device in named
    return any(isinstance(t, torch.Tensor) and t.device.type == device for t in _leaves(x))


def _call(fn: Callable[[], Any], seed: int) -> _Result:
    import torch

    torch.manual_seed(seed)
    try:
        return _Result(value=fn())
    except Exception as e:  # noqa: BLE001 - an exception is an outcome
        return _Result(error=e, trace=traceback.format_exc(limit=8))


def _tensors(x: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(x) if isinstance(t, torch.Tensor)]


def _leaves(x: Any) -> list[Any]:
    from torch.utils._pytree import tree_leaves

    return list(tree_leaves(x))


def _bitwise(a: Any, b: Any) -> bool:
    import torch

    if a.is_complex():
        a, b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
    if a.dtype.is_floating_point:
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _plain(t: Any) -> Any:
    """A strided CPU tensor of t's values (its own memory)."""
    import torch

    t = t.detach()
    if t.is_quantized:
        t = t.dequantize()
    if t.is_nested:
        return [_plain(u) for u in t.unbind()]
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.cpu().resolve_conj().resolve_neg()


def compare(cpu: Any, dev: Any, device: str, random: bool = False, on_device: bool = True) -> tuple[str, str]:
    """(code, detail) comparing two results: pytrees of tensors and plain values. on_device: the device
    run's inputs held or named the device (else its outputs stay where the CPU run's are, as on CUDA)."""
    import torch

    a, b = _leaves(cpu), _leaves(dev)
    if len(a) != len(b):
        return "m", f"{len(a)} outputs on the CPU, {len(b)} on the device"
    code, detail = "=", ""
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return "m", f"output {i}: {type(x).__name__} on the CPU, {type(y).__name__} on the device"
        if not isinstance(x, torch.Tensor):
            same = x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
            if not same:
                return "x", f"output {i}: {x!r} on the CPU, {y!r} on the device"
            continue
        if x.dtype != y.dtype or x.shape != y.shape or x.layout != y.layout:
            return "m", f"output {i}: {x.dtype}{list(x.shape)} {x.layout} on the CPU, {y.dtype}{list(y.shape)} {y.layout} on the device"
        if y.device.type != (device if x.device.type == "cpu" and on_device else x.device.type):
            return "m", f"output {i}: on {y.device.type} in the device run, on {x.device.type} in the CPU run"
        if random:
            code = "r"
            continue
        px, py = _plain(x), _plain(y)
        if isinstance(px, list):
            if len(px) != len(py) or not all(u.shape == v.shape and _bitwise(u, v) for u, v in zip(px, py)):
                return "x", f"output {i}: nested components differ"
            continue
        if not _bitwise(px, py):
            try:
                torch.testing.assert_close(py, px, equal_nan=True, check_device=False)
                code, detail = "~", f"output {i}: close, not bitwise"
            except AssertionError as e:
                return "x", f"output {i}: " + " ".join(str(e).split())[:300]
    return code, detail


def _run_pair(op: Any, sample: Any, device: str, seed: int, backward: bool, gen_seed: int,
              where: list[bool] | None = None) -> tuple[str, str]:
    import torch

    random = _random(op)
    cpu_s = _move((sample.input, sample.args, sample.kwargs), "cpu")
    try:
        dev_s = _move((sample.input, sample.args, sample.kwargs), device, where=where)
    except Exception as e:  # noqa: BLE001
        return "D", "moving the sample to the device: " + _first_line(e)

    def forward(s: Any, dev: str) -> Callable[[], Any]:
        inp, args, kwargs = s
        return lambda: op(inp, *args, **kwargs)

    def grads(s: Any, dev: str) -> Callable[[], Any]:
        def go() -> Any:
            out = forward(s, dev)()
            outs = [t for t in _tensors(out) if t.requires_grad and (t.dtype.is_floating_point or t.is_complex())]
            leaves = [t for t in _tensors(s) if t.requires_grad and t.is_leaf]
            if not outs or not leaves:
                return None
            g = torch.Generator().manual_seed(gen_seed)
            cot = []
            for t in outs:
                c = torch.randn(t.shape, dtype=t.dtype, generator=g)
                cot.append(c.to(t.device) if t.layout == torch.strided else torch.ones_like(t))
            return torch.autograd.grad(outs, leaves, cot, allow_unused=True)

        return go

    make = grads if backward else forward
    rc = _call(make(cpu_s, "cpu"), seed)
    rd = _call(make(dev_s, device), seed)
    if rc.error is not None and rd.error is not None:
        if type(rc.error) is type(rd.error):
            return "=", ""
        return "T", f"CPU {_first_line(rc.error)} | device {_first_line(rd.error)}"
    if rd.error is not None:
        if device.startswith("npu") and (_NPU_REFUSAL.search(str(rd.error)) or
                                         (isinstance(rd.error, NotImplementedError) and
                                          _NPU_NO_CSR_KERNEL.search(str(rd.error)))):
            return "n", _first_line(rd.error)
        return "D", _first_line(rd.error) + "\n" + rd.trace[-1500:]
    if rc.error is not None:
        return "C", _first_line(rc.error)
    if backward and rc.value is None and rd.value is None:
        return "", ""
    try:
        return compare(rc.value, rd.value, device, random, _names_device(dev_s, device))
    except Exception as e:  # noqa: BLE001
        return "D", "comparing: " + _first_line(e)


_LCE_POLICY = ("torch's chunked linear_cross_entropy branches on device.type == 'cuda' (its acc_policy default, "
               "cuBLAS's out_dtype products aten::mm.dtype instead of upcast copies): the device takes CUDA's "
               "branch, the CPU oracle the CPU's, so in float16/bfloat16 the difference is CUDA's own")
#: OpInfos where torch's own Python takes another path for a cuda tensor than for a CPU one: a difference
#: from the CPU oracle there is what CUDA computes too, said in the case's detail
DEVICE_TYPE_PATHS = {"nn.functional.linear_cross_entropy.chunked": _LCE_POLICY,
                     "nn.functional.linear_cross_entropy.chunked_none": _LCE_POLICY}


def run_op(op: Any, device: str, modes: Iterable[str] = ("forward", "backward", "error"),
           dtypes: Iterable[str] | None = None, samples: int | None = None, seed: int = 0) -> Iterator[Case]:
    """Every case of one OpInfo: per dtype the CPU supports, its sample inputs forward and backward, then its
    error inputs. Never raises for an op's own failure: that is an outcome."""
    import torch

    name = op_names(op)
    modes = set(modes)
    wanted = set(dtypes or [])
    warnings.filterwarnings("ignore")
    all_dtypes = sorted(op.supported_dtypes("cpu"), key=str)
    bwd = op.supported_backward_dtypes("cpu") if op.supports_autograd else set()
    for dtype in all_dtypes:
        dname = str(dtype).removeprefix("torch.")
        if wanted and dname not in wanted:
            continue
        passes = [m for m in ("forward", "backward", "graph", "meta") if m in modes and (m != "backward" or dtype in bwd)]
        for mode in passes:
            torch.manual_seed(seed)
            try:
                gen = op.sample_inputs("cpu", dtype, requires_grad=mode == "backward")
                it = iter(gen)
            except Exception as e:  # noqa: BLE001
                yield Case(name, dname, mode, -1, "s", "sample inputs: " + _first_line(e))
                continue
            dev_it = _device_samples(op, device, dtype, mode == "backward")
            i = 0
            while samples is None or i < samples:
                try:
                    sample = next(it)
                except StopIteration:
                    break
                except Exception as e:  # noqa: BLE001
                    yield Case(name, dname, mode, i, "s", "sample inputs: " + _first_line(e))
                    break
                where = _placement(sample, _next(dev_it), device)
                if mode in ("graph", "meta"):
                    code, detail = _oracle(op, sample, device, mode, where, seed + i)
                else:
                    code, detail = _run_pair(op, sample, device, seed + i, mode == "backward", seed + 1000 + i, where)
                if code in ("x", "~") and name in DEVICE_TYPE_PATHS:
                    detail += f" ({DEVICE_TYPE_PATHS[name]})"
                if code:
                    yield Case(name, dname, mode, i, code, detail)
                i += 1
    if "error" in modes:
        yield from _errors(op, name, device, seed)
    if "sparse" in modes:
        yield from _sparse(op, name, device, wanted, samples, seed)


def _oracle(op: Any, sample: Any, device: str, mode: str, where: list[bool] | None, seed: int) -> tuple[str, str]:
    """One sample through the graph-replay or the meta-agreement oracle (opdb_oracles.py), on the device alone."""
    import torch

    if _random(op) or _seeds_itself(op) or any(k in ("p", "dropout_p") and isinstance(v, float) and v > 0
                                               for k, v in sample.kwargs.items()):
        return "r", ""
    try:
        inp, args, kwargs = _move((sample.input, sample.args, sample.kwargs), device, rg=False, where=where)
    except Exception as e:  # noqa: BLE001
        return "s", "moving the sample to the device: " + _first_line(e)
    torch.manual_seed(seed)
    try:
        if mode == "graph":
            return graph_case(op, inp, args, kwargs, lambda a, b, d: compare(a, b, d, False, True), device)
        return meta_case(op, inp, args, kwargs)
    except Exception as e:  # noqa: BLE001 - the oracle's own failure is reported, never raised
        return "D", f"{mode} oracle: " + _first_line(e)


def _seeds_itself(op: Any) -> bool:
    """An OpInfo that seeds the generator around each call and restores it after (wrapper_set_seed in
    freeze_rng_state): it draws, reproducibly in eager, but a graph replay repeats no host-side seeding."""
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def _device_samples(op: Any, device: str, dtype: Any, requires_grad: bool) -> Iterator[Any] | None:
    """The OpInfo's samples built for the device, read only for where they place their tensors."""
    try:
        return iter(op.sample_inputs(device, dtype, requires_grad=requires_grad))
    except Exception:  # noqa: BLE001 - then every tensor goes to the device
        return None


def _next(it: Iterator[Any] | None) -> Any:
    if it is None:
        return None
    try:
        return next(it)
    except Exception:  # noqa: BLE001 - exhausted or failing: no placement for this sample
        return None


def _errors(op: Any, name: str, device: str, seed: int) -> Iterator[Case]:
    import torch

    if op.error_inputs_func is None:
        return
    torch.manual_seed(seed)
    try:
        inputs = list(op.error_inputs(device))
    except Exception as e:  # noqa: BLE001
        yield Case(name, "-", "error", -1, "s", "error inputs: " + _first_line(e))
        return
    for i, ei in enumerate(inputs):
        s = ei.sample_input
        r = _call(lambda: op(s.input, *s.args, **s.kwargs), seed)
        if r.error is not None and isinstance(r.error, ei.error_type):
            yield Case(name, "-", "error", i, "=")
            continue
        got = "no exception" if r.error is None else _first_line(r.error)
        try:  # the CPU's outcome for the same input: what the device promises
            h = _move((s.input, s.args, s.kwargs), "cpu", rg=False)
            rc = _call(lambda: op(h[0], *h[1], **h[2]), seed)
            cpu_same = type(rc.error) is type(r.error)
        except Exception:  # noqa: BLE001 - the input cannot be built on the CPU
            cpu_same = False
        if cpu_same:
            yield Case(name, "-", "error", i, "c", f"expected {ei.error_type.__name__}; {got} on the device and the CPU")
        elif r.error is None:
            yield Case(name, "-", "error", i, "M", f"expected {ei.error_type.__name__}: {ei.error_regex}")
        else:
            yield Case(name, "-", "error", i, "W", f"expected {ei.error_type.__name__}, got " + got)


def _sparse(op: Any, name: str, device: str, wanted: set[str], samples: int | None, seed: int) -> Iterator[Case]:
    import torch

    for layout, flag, fn in (("coo", "supports_sparse", "sample_inputs_sparse_coo"),
                             ("csr", "supports_sparse_csr", "sample_inputs_sparse_csr")):
        if not getattr(op, flag, False):
            continue
        for dtype in sorted(op.supported_dtypes("cpu"), key=str):
            dname = str(dtype).removeprefix("torch.")
            if wanted and dname not in wanted:
                continue
            torch.manual_seed(seed)
            try:
                gen = list(getattr(op, fn)("cpu", dtype))[:samples]
            except Exception as e:  # noqa: BLE001
                yield Case(name, dname, f"sparse_{layout}", -1, "s", "sample inputs: " + _first_line(e))
                continue
            for i, sample in enumerate(gen):
                code, detail = _run_pair(op, sample, device, seed + i, False, 0)
                yield Case(name, dname, f"sparse_{layout}", i, code, detail)


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: cases, count per code, the share equal (`=`; random ops' `r` count as equal: only their
    shape and dtype are comparable; so do error inputs the device treats as the CPU does, `c`, and the
    simulated NPU's refusals in torch_npu's words, `n`)."""
    out: dict[str, Any] = {}
    for r in rows:
        m = out.setdefault(r["mode"], {"cases": 0, "codes": {}})
        if r["code"] == "s":
            m["codes"]["s"] = m["codes"].get("s", 0) + 1
            continue
        m["cases"] += 1
        m["codes"][r["code"]] = m["codes"].get(r["code"], 0) + 1
    for m in out.values():
        ok = sum(m["codes"].get(c, 0) for c in "=rcnef")
        m["equal_share"] = round(ok / m["cases"], 5) if m["cases"] else None
    return out
