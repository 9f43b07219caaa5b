"""Compiled flex attention that trains on the emulated devices.

Inductor lowers flex_attention on a GPU to its Triton templates, forward (with the log-sum-exp the
backward needs) and backward; on the device it takes the CPU's C++ template (compile.py), which computes
the attention alone. So where a compiled graph reads the log-sum-exp (a backward, return_lse) and for
every flex_attention_backward, this post-grad pass replaces the higher-order operator with PyTorch's own
dense implementation of it (the eager operator's, torch._higher_order_ops.flex_attention.sdpa_dense and
sdpa_dense_backward), traced into aten operators with the node's fake values and inlined: Inductor then
compiles it like any other graph (C++ kernels, captured and replayed like any other). The score and
mask functions are the graph's own submodules, called by the dense code as the eager operator calls them.
Inference without the log-sum-exp keeps the C++ template.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any

__all__ = ["decompose_flex"]


def _targets() -> tuple[Any, Any]:
    import torch

    return torch.ops.higher_order.flex_attention, torch.ops.higher_order.flex_attention_backward


def _aux_read(node: Any) -> bool:
    return any(u.target is operator.getitem and u.args[1] != 0 for u in node.users)


def decompose_flex(gm: Any) -> None:
    """Inline the dense implementation for each flex_attention whose log-sum-exp is read and each
    flex_attention_backward of `gm` (a post-grad graph)."""
    fwd, bwd = _targets()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and
             (n.target is bwd or (n.target is fwd and _aux_read(n)))]
    for node in nodes:
        _inline(gm, node, node.target is fwd)
    if nodes:
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()


def _inline(gm: Any, node: Any, forward: bool) -> None:
    import torch
    from torch._guards import detect_fake_mode
    from torch._higher_order_ops.flex_attention import sdpa_dense, sdpa_dense_backward
    from torch._inductor.pattern_matcher import fwd_only
    from torch.utils._pytree import tree_flatten, tree_unflatten

    flat, spec = tree_flatten((node.args, node.kwargs))
    leaves: list[Any] = []  # the graph's values the dense code reads: placeholders of the traced graph
    fixed: list[Any] = []
    slots: list[int] = []
    for i, a in enumerate(flat):
        if _is_function(gm, a):
            fixed.append(getattr(gm, a.target))  # the score / mask function: called, not an input
        elif isinstance(a, torch.fx.Node):
            fixed.append(None)
            leaves.append(a)
            slots.append(i)
        else:
            fixed.append(a)

    def dense(*values: Any) -> Any:
        filled = list(fixed)
        for i, v in zip(slots, values):
            filled[i] = v
        args, kwargs = tree_unflatten(filled, spec)
        return (sdpa_dense if forward else sdpa_dense_backward)(*args, **kwargs)

    values = [a.meta["val"] for a in leaves]
    # the graph's fake mode, active: what the dense code makes itself (index ranges, constants) is fake too
    with detect_fake_mode(values) or contextlib.nullcontext():
        traced = fwd_only(dense, values, run_functional_passes=False)
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    val_map = dict(zip(placeholders, leaves))
    for n in traced.graph.nodes:  # the traced graph's constants become the graph's own attributes
        if n.op == "get_attr":
            name = f"_flex_dense_{len(gm.graph.nodes)}_{n.target}"
            gm.register_buffer(name, _real_constant(getattr(traced, n.target), n.target))
            with gm.graph.inserting_before(node):
                attr = gm.graph.get_attr(name)
            attr.meta.update(n.meta)
            val_map[n] = attr
    with gm.graph.inserting_before(node):
        outs = gm.graph.graph_copy(traced.graph, val_map)
    _replace_items(node, outs)
    gm.graph.erase_node(node)


def _real_constant(value: Any, name: str) -> Any:
    """A constant the traced code made (torch.tensor(-inf) for masked scores) as a real tensor: under the
    fake mode it is a FakeTensor that keeps its real value for small literals."""
    from torch._subclasses.fake_tensor import is_fake

    if not is_fake(value):
        return value
    real = getattr(value, "constant", None)
    if real is None:
        raise RuntimeError(f"cudashim: flex attention's dense code made a constant ({name}) with no known value")
    return real


def _is_function(gm: Any, a: Any) -> bool:
    import torch

    return isinstance(a, torch.fx.Node) and a.op == "get_attr" and isinstance(getattr(gm, a.target), torch.nn.Module)


def _replace_items(node: Any, value: Any) -> None:
    """Point each getitem user of `node` (a tuple-valued node, nested tuples included) at its value."""
    for user in list(node.users):
        if user.target is not operator.getitem:
            raise RuntimeError(f"cudashim: a flex attention output read by {user.target}, not by indexing")
        item = value[user.args[1]]
        if isinstance(item, (tuple, list)):
            _replace_items(user, item)
        else:
            user.replace_all_uses_with(item)
        user.graph.erase_node(user)
