"""The import hook's answer for a really watched module: the real spec and the loader wrapper.

The finder behind cudashim.importhook asks here once a module is watched (watch(), when_imported()),
not for the armed names of a start-up: every shimmed interpreter loads the finder, few of them ever
look a watched module up. Nothing here imports the package (it hands over the watch and `fire`).

    resolve(finder, name, path, target, watch, fire)   the spec to answer, its loader wrapped
"""

import gc
import sys

# loaded after start-up, but still inside an import of the user's: no typing at import either
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any, Callable

__all__ = ["resolve"]


def resolve(finder: "Any", fullname: str, path: "Any", target: "Any", watch: "Any",
            fire: "Callable[[str, ModuleType], None]") -> "ModuleSpec | None":
    """The spec of `fullname` from the finders behind `finder` (else the watch's stand-in), its loader
    wrapped so that fire(fullname, module) runs right after the module's code when callbacks watch it."""
    spec = _find_behind(finder, fullname, path, target)
    if spec is None and watch.standin is not None:
        spec = watch.standin(fullname)
    if spec is None:
        return None
    if spec.loader is None and spec.submodule_search_locations is not None:
        spec.loader = _namespace_loader(spec)  # what importlib would fill in, made explicit to wrap it
    if not watch.wrapped():  # a parent watched only to be stood in: real, leave it be
        return spec
    if spec.loader is not None and hasattr(spec.loader, "exec_module") and not isinstance(spec.loader, _Loader):
        spec.loader = _Loader(spec.loader, fullname, fire, watch)
    return spec


def _find_behind(finder: "Any", fullname: str, path: "Any", target: "Any") -> "ModuleSpec | None":
    finders = list(sys.meta_path)
    try:
        finders = finders[finders.index(finder) + 1 :]
    except ValueError:  # called while not on meta_path (e.g. a copy of it): ask everyone else
        finders = [f for f in finders if f is not finder]
    for other in finders:
        find = getattr(other, "find_spec", None)
        if find is None:
            continue
        spec = find(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _namespace_loader(spec: "ModuleSpec") -> "Any":
    import importlib.machinery as machinery

    cls = getattr(machinery, "NamespaceLoader", None)
    if cls is None:  # Python 3.10
        from importlib import _bootstrap_external  # type: ignore[attr-defined]

        cls = _bootstrap_external._NamespaceLoader
    loader = cls.__new__(cls)
    loader._path = spec.submodule_search_locations  # as importlib._bootstrap._init_module_attrs does
    return loader


class _Loader:
    """Delegates to the real loader; after exec_module runs the callbacks watching the module. A quiet
    one (importhook.pause_gc) runs both with the cyclic garbage collector paused."""

    def __init__(self, loader: "Any", name: str, fire: "Callable[[str, ModuleType], None]", watch: "Any") -> None:
        self._loader = loader
        self._name = name
        self._fire = fire
        self._watch = watch  # its `loading` says the module's code runs (callbacks added meanwhile wait for it)
        self._quiet = watch.quiet

    def __getattr__(self, attr: str) -> "Any":  # get_data, get_filename, is_package, get_source...
        return getattr(self._loader, attr)

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: "ModuleType") -> None:
        # the module's own code (and anyone inspecting it later) sees the real loader, not us
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        # left as it is where the program, or an enclosing quiet load, disabled it
        paused = self._quiet and gc.isenabled()
        if paused:
            gc.disable()
        self._watch.loading = True
        try:
            try:
                self._loader.exec_module(module)
            finally:
                self._watch.loading = False
            # a module may replace itself in sys.modules while running (lazy-module pattern)
            self._fire(self._name, sys.modules.get(self._name, module))
        finally:
            if paused:
                gc.enable()
