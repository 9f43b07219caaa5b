"""Where a patch's replacement "module:symbol" lives, found without running it; importing it from there.

A config's replacements resolve relative to the config's folder first (a module beside the config is
the project's own, whatever script runs), then on sys.path. Under `cudashim run` a config error must
stop the process before user code, so the bootstrap checks every replacement here first:

* locate(): the full module spec, walked one package level at a time through the finders' specs
  (importlib.util.find_spec("a.b") would import and run package `a`);
* missing(): whether the module's source binds the symbol at top level (parsed with ast, not run).
  Where source cannot show it (a module `__getattr__`, a star import, `globals()` writes, a compiled
  module) the answer is "unknown" and the patch is checked at first use instead.

import_replacement() is what the patch machinery calls on first use; `cudashim patches --check`
imports every replacement through it. Loaded only when a config has patches: no cost otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["locate", "missing", "import_replacement", "UNKNOWN"]

UNKNOWN = "unknown"  # missing(): the source cannot tell; checked at first use


def _beside(top: str, folder: str | None) -> Any:
    """The spec of `top` in the config's folder: a module or a regular package, not a bare folder
    (a namespace package there, e.g. a checkout named like the installed package, shadows nothing)."""
    if not folder:
        return None
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(top, [folder])
    return spec if spec is not None and spec.origin is not None and spec.loader is not None else None


def _find_top(top: str, folder: str | None) -> Any:
    spec = _beside(top, folder)
    if spec is not None:
        return spec
    mod = sys.modules.get(top)
    if mod is not None:
        return getattr(mod, "__spec__", None)
    import importlib.util

    try:
        return importlib.util.find_spec(top)  # a top-level name: finders only, nothing runs
    except (ImportError, ValueError):
        return None


def locate(module: str, folder: str | None) -> tuple[Any, str | None]:
    """(spec, None) for `module`, or (None, why) naming the first part that cannot be found."""
    from importlib.machinery import PathFinder

    parts = module.split(".")
    spec = _find_top(parts[0], folder)
    if spec is None:
        where = f"beside the config ({folder}) or on sys.path" if folder else "on sys.path"
        return None, f"no module named {parts[0]!r} {where}"
    for i in range(1, len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            spec = loaded.__spec__
            continue
        locations = spec.submodule_search_locations
        if locations is None:
            return None, f"{'.'.join(parts[:i])!r} is a module, not a package, so it has no {parts[i]!r}"
        spec = PathFinder.find_spec(name, list(locations))
        if spec is None:
            return None, f"no module named {name!r} (package {'.'.join(parts[:i])!r} has no {parts[i]!r})"
    return spec, None


def _binds(tree: Any, name: str) -> bool | str:
    """True when the module body binds `name`; UNKNOWN when only running it could tell."""
    import ast

    found: bool | str = False

    def targets(node: Any) -> Any:
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                yield from targets(elt)
        elif isinstance(node, ast.Starred):
            yield from targets(node.value)

    def body(stmts: Any) -> None:
        nonlocal found
        for node in stmts:
            bound: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.append(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    bound.extend(targets(t))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and getattr(node, "value", True) is not None:
                bound.extend(targets(node.target))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        found = found or UNKNOWN  # a star import: what it brings is the other module's
                    bound.append(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                bound.extend(targets(node.target))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        bound.extend(targets(item.optional_vars))
            if "__getattr__" in bound:
                found = found or UNKNOWN  # PEP 562: any name may exist
            if name in bound:
                found = True
                return
            for field in ("body", "orelse", "finalbody"):  # module-level if/try/for/while/with blocks
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    body(inner)
                    if found is True:
                        return
            for handler in getattr(node, "handlers", ()) or ():
                body(handler.body)
                if found is True:
                    return

    body(tree.body)
    return found


def missing(spec: Any, symbol: str) -> str | None:
    """None when the module's source binds the first part of `symbol` (or cannot tell: UNKNOWN is
    returned for that); else why not, in words."""
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py") or not os.path.isfile(origin):
        return UNKNOWN  # compiled, frozen, built-in or a namespace package: only importing can tell
    with open(origin, "rb") as f:
        source = f.read()
    import ast

    try:
        tree = ast.parse(source, origin)
    except (SyntaxError, ValueError) as e:
        return f"{origin} does not parse ({type(e).__name__}: {e})"
    if b"globals()" in source:
        return UNKNOWN  # names written through globals(): only running it can tell
    binds = _binds(tree, symbol.split(".")[0])
    if binds is True:
        return None
    if binds == UNKNOWN:
        return UNKNOWN
    return f"{origin} defines no {symbol.split('.')[0]!r} at top level"


def import_replacement(module: str, folder: str | None) -> Any:
    """Import `module`, its top-level package taken from `folder` (the config's) when it is there."""
    import importlib

    top = module.partition(".")[0]
    spec = _beside(top, folder) if top not in sys.modules else None
    if spec is not None:
        _load_beside(top, spec)
    return importlib.import_module(module)


def _load_beside(top: str, spec: Any) -> None:
    """Run `top` from its spec under importlib's own lock for that name, marked as initializing while
    it runs: another thread importing it meanwhile waits for the whole module (importlib's
    import_module does so for a module marked initializing) instead of taking the half-run one from
    sys.modules, and importlib's deadlock detection still covers circular imports between threads."""
    from importlib import _bootstrap  # type: ignore[attr-defined]

    with _bootstrap._ModuleLockManager(top):
        if top not in sys.modules:  # another thread loaded it while this one waited for the lock
            _bootstrap._load_unlocked(spec)  # sets spec._initializing; drops it from sys.modules on failure
