"""Print the parameters (name, kind, default) of every public callable of torch.cuda and its
memory, random, graphs and streams modules as JSON: run once with the shim off (the oracle) and once
under it (test_signatures.py compares the two)."""

from __future__ import annotations

import importlib
import inspect
import json

import torch  # noqa: F401  (under `cudashim run` the import hook installs the device here)

MODULES = ("torch.cuda", "torch.cuda.memory", "torch.cuda.random", "torch.cuda.graphs", "torch.cuda.streams")


def parameters(fn: object) -> list[list[str]] | None:
    """fn's parameters, or None where inspect cannot read them (a C type without a text signature)."""
    try:
        sig = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, repr(p.default)] for p in sig.parameters.values()]


out: dict[str, list[list[str]] | None] = {}
for module_name in MODULES:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    for name in names:
        value = getattr(module, name, None)
        if callable(value):
            out[f"{module_name}.{name}"] = parameters(value)
print(json.dumps(out))
