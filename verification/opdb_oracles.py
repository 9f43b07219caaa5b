"""Two oracles over op_db's sample inputs that need no CPU twin, each a mode of the sweep (opdb_cases.py):

graph: the operator captured in a CUDA graph, its inputs then changed in place, the graph replayed, and
    what the replay wrote compared with the operator run eagerly on the new inputs. CUDA passes by
    construction (a graph re-launches its kernels on what their addresses hold): a difference is work the
    device did at capture instead of recording it for replay. A capture the device refuses with CUDA's
    capture error (a synchronizing operator) is `g`.
meta: the operator run on the device under a dispatch mode that runs every aten operator it reaches again
    on FakeTensors (what torch.compile traces with) and compares each output's shape, strides, dtype and
    device with the real one's: a difference is a kernel whose outputs break a compiled program's
    assumptions (Inductor asserts sizes and strides of extern kernels' outputs).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["GRAPH_CODES", "META_CODES", "graph_case", "meta_case"]

GRAPH_CODES = {
    "g": "graph: the device refused the capture with CUDA's capture error (a synchronizing operator)",
    "e": "graph: the sample cannot be replayed on new inputs (the operator raised eagerly on them, or returns "
         "no tensor; counted as equal)",
}
META_CODES: dict[str, str] = {}  # meta's differences are `m` (opdb_cases.CODES); a FakeTensor run that raises is no case


def _new_values(t: Any) -> Any:
    """t's values moved by one place (every value stays one t had: indices stay in range), halved for
    floating types so that a tensor of one value changes too."""
    import torch

    flat = t.detach().reshape(-1).roll(1).reshape(t.shape)
    if t.dtype.is_floating_point or t.is_complex():
        flat = flat * 0.5
    return flat


def graph_case(op: Any, inp: Any, args: Any, kwargs: Any, compare: Callable[..., tuple[str, str]],
               device: str) -> tuple[str, str]:
    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    def call(i: Any, a: Any, k: Any) -> Any:
        return op(i, *a, **k)

    with torch.no_grad():
        try:  # warm-up, eagerly, on a side stream (as torch.cuda.graph's users do)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                if _draws(lambda: call(*_copies((inp, args, kwargs), device)), compare, device):
                    return "r", "draws random numbers"
                call(inp, args, kwargs)
            torch.cuda.current_stream().wait_stream(s)
        except Exception as e:  # noqa: BLE001
            return "e", "eager: " + f"{type(e).__name__}: {str(e)[:200]}"
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                out = call(inp, args, kwargs)
        except Exception as e:  # noqa: BLE001
            text = str(e)
            if "operation not permitted when stream is capturing" in text or "previous error during capture" in text:
                return "g", text.splitlines()[0][:200]
            return "D", f"capture: {type(e).__name__}: {text[:300]}"
        leaves, _ = tree_flatten(out)
        if not any(isinstance(x, torch.Tensor) for x in leaves):
            return "e", "no tensor output"
        ins = [t for t in tree_flatten((inp, args, kwargs))[0]
               if isinstance(t, torch.Tensor) and t.device.type == device and t.layout == torch.strided]
        for t in ins:
            t.copy_(_new_values(t))
        # eager on the new inputs first, on copies (an in-place operator's replay writes the inputs); new
        # inputs the operator refuses (offsets out of order, a matrix no longer positive-definite) are no case
        try:
            want = call(*_copies((inp, args, kwargs), device))
        except Exception as e:  # noqa: BLE001
            return "e", "eager on the new inputs: " + f"{type(e).__name__}: {str(e)[:200]}"
        g.replay()
        torch.cuda.synchronize()
        got = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, out)
        del g
        return compare(want, got, device)


def _copies(x: Any, device: str) -> Any:
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) and t.device.type == device else t, x)


def _draws(run: Callable[[], Any], compare: Callable[..., tuple[str, str]], device: str) -> bool:
    """Whether the operator draws random numbers (internally: fractional max pooling's samples, a
    low-rank SVD's test matrix): it moves the device's generator, or two eager runs on the same inputs
    under different seeds differ. (An OpInfo may seed the generator itself before each call,
    wrapper_set_seed, which a replay does not repeat: only the generator's move shows those.)"""
    import torch

    torch.manual_seed(1)
    before = torch.cuda.get_rng_state()
    a = run()
    if not torch.equal(before, torch.cuda.get_rng_state()):
        return True
    torch.manual_seed(2)
    b = run()
    return compare(a, b, device)[0] != "="


def meta_case(op: Any, inp: Any, args: Any, kwargs: Any) -> tuple[str, str]:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map

    fake = FakeTensorMode(allow_non_fake_inputs=False)
    found: list[str] = []
    skipped: list[str] = []

    def as_fake(x: Any) -> Any:
        return fake.from_tensor(x) if isinstance(x, torch.Tensor) else x

    class Check(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, a: Any = (), k: Any = None) -> Any:
            k = k or {}
            if func.namespace != "aten" or torch.Tag.nondeterministic_seeded in func.tags:
                return func(*a, **k)
            predicted: Any = None
            known = True
            try:  # the prediction first: an in-place operator changes its arguments
                with torch.utils._python_dispatch._disable_current_modes():
                    fa, fk = tree_map(as_fake, (a, k))
                with fake:
                    predicted = func(*fa, **fk)
            except Exception as e:  # noqa: BLE001 - no prediction (data-dependent shapes)
                skipped.append(f"{func}: {type(e).__name__}")
                known = False
            real = func(*a, **k)
            if not known:
                return real
            r, _ = tree_flatten(real)
            p, _ = tree_flatten(predicted)
            if len(r) != len(p):
                found.append(f"{func}: {len(r)} outputs, meta {len(p)}")
                return real
            for i, (x, y) in enumerate(zip(r, p)):
                if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
                    found.append(f"{func} output {i}: {type(x).__name__}, meta {type(y).__name__}")
                elif isinstance(x, torch.Tensor):
                    why = _differs(x, y)
                    if why:
                        found.append(f"{func} output {i}: {why}")
            return real

    with torch.no_grad(), Check():
        try:
            op(inp, *args, **kwargs)
        except Exception as e:  # noqa: BLE001
            return "e", f"{type(e).__name__}: {str(e)[:200]}"
    if found:
        return "m", "; ".join(dict.fromkeys(found))[:600]
    return "=", ""


def _differs(x: Any, y: Any) -> str:
    """How a real output differs from its FakeTensor prediction: rank, shape, dtype, device, or a stride
    of a dimension longer than one (the strides a compiled program's size/stride asserts check)."""
    if x.dim() != y.dim():
        return f"rank {x.dim()}, meta {y.dim()}"
    if tuple(x.shape) != tuple(y.shape):
        return f"shape {list(x.shape)}, meta {list(y.shape)}"
    if x.dtype != y.dtype:
        return f"dtype {x.dtype}, meta {y.dtype}"
    if x.device != y.device:
        return f"device {x.device}, meta {y.device}"
    if x.layout != y.layout:
        return f"layout {x.layout}, meta {y.layout}"
    import torch

    if x.layout == torch.strided and x.numel() > 0:
        for d in range(x.dim()):
            if x.shape[d] > 1 and x.stride(d) != y.stride(d):
                return f"strides {list(x.stride())}, meta {list(y.stride())} (shape {list(x.shape)})"
    return ""
