"""The one `sys.meta_path` finder: armed names, post-import callbacks and stand-ins for absent modules.

    defer(names, load)          armed names: the first lookup of any of them calls load() first
                                (the one "know the names now, load on first lookup" mechanism)
    when_imported(name, cb)     cb(module) right after `name` loads, or at once if it is loaded
    loading(name)               whether a watched module's code is running now (its import not ended)
    watch(name, on_load, standin)   persistent watch (patches): every load; stand-in when absent
    pause_gc(names)             the next load of each runs with the cyclic garbage collector paused

The bootstrap arms the hook with the module names it will care about (torch and the patch
targets), so cudashim.patches' registry and cudashim.installers load only when one of them is first
looked up; patches and installers both register their callbacks here and never import each other.

Modelled on wrapt's importer.py: the finder is asked first for every import, answers "not mine" with
one dict lookup for modules nobody watches, and for a watched module asks the finders behind it for
the real spec, then wraps the loader so that callbacks run right after the module's code has run
(still under the module's import lock, so no other thread sees the module unpatched).
When no finder knows a watched module and a stand-in factory is registered, the factory's spec wins.
That work (cudashim.importhook._spec) loads on the first lookup of a really watched name: every
shimmed start-up loads this module, with armed names only, and pays for no more of it than that.
"""

import _thread
import sys

# The bootstrap installs this finder in every shimmed interpreter before user code: no threading,
# dataclasses, typing or `from __future__ import annotations` at import (_thread's RLock and _local
# are what threading hands out anyway; annotations naming typing's names are strings).
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any, Callable, Iterable

    Callback = Callable[[ModuleType], None]
    StandinFactory = Callable[[str], "ModuleSpec | None"]

__all__ = ["Deferred", "when_imported", "loading", "watch", "pause_gc", "defer", "load_armed", "unwatch_all", "clear", "installed",
           "FINDER"]


class _Watch:
    __slots__ = ("once", "always", "standin", "deferred", "quiet", "loading")

    def __init__(self) -> None:
        self.once: list[Callback] = []  # when_imported(): fire once, then forget
        self.always: list[Callback] = []  # patches: fire on every (re)load
        self.standin: StandinFactory | None = None  # spec to use when no other finder knows the module
        self.deferred = False  # armed by defer(): the first lookup loads what was deferred
        self.quiet = False  # pause_gc(): the next load runs with the cyclic garbage collector paused
        self.loading = False  # the module's code is running now, through the hook's loader

    def wrapped(self) -> bool:
        """Whether a load of the module goes through the hook's loader (callbacks or a pause to run)."""
        return bool(self.once or self.always or self.quiet)

    def empty(self) -> bool:
        return not self.wrapped() and self.standin is None and not self.deferred and not self.loading


# All mutable state of the hook: module name -> what to do when it loads.
_watched: dict[str, _Watch] = {}
_lock = _thread.RLock()
_local = _thread._local()  # per-thread set of names being looked up (re-entrancy guard)
_pending: "Deferred | None" = None  # the armed names of defer(), until they load


class Deferred:
    """Names known now, what they need loaded on the first lookup of any of them (see defer()).

    state: "armed" (placeholders watched) -> "loaded" (load() ran) | "off" (cancelled first).
    """

    def __init__(self, names: "Iterable[str]", load: "Callable[[], None]") -> None:
        self.names = frozenset(names)
        self._load = load
        self.state = "armed"

    def load(self) -> None:
        """Run the deferred load now, once; a no-op once loaded or cancelled."""
        global _pending
        with _lock:
            if self.state != "armed":
                return
            self.state = "loaded"
            if _pending is self:
                _pending = None
            _drop_placeholders()
            # under the lock, so a second thread's lookup waits for the real watches
            self._load()

    def cancel(self) -> bool:
        """Drop the armed names (if still armed); True when the deferred load had already run."""
        global _pending
        with _lock:
            loaded, self.state = self.state == "loaded", "off"
            if _pending is self:
                _pending = None
                _drop_placeholders()
        atexit = sys.modules.get("atexit")  # defer() imported it
        if atexit is not None:
            atexit.unregister(_remove_finder)
        return loaded

    def __repr__(self) -> str:
        return f"<cudashim armed import hook ({self.state}) for {', '.join(sorted(self.names))}>"


class _Finder:
    """Asked first for every import; O(1) "not mine" for modules nobody watches."""

    def find_spec(self, fullname: str, path: "Any" = None, target: "Any" = None) -> "ModuleSpec | None":
        watch = _watched.get(fullname)
        if watch is None:
            return None
        if watch.deferred:
            pending = _pending
            if pending is not None:
                pending.load()  # registers the real watches (and clears the placeholders) before we answer
            watch = _watched.get(fullname)
            if watch is None or watch.deferred:
                return None
        busy: set[str] = _local.__dict__.setdefault("busy", set())
        if fullname in busy:  # a finder behind us asked importlib.util.find_spec(fullname) again
            return None
        busy.add(fullname)
        try:
            # the spec lookup and the loader wrapper load here, on the first lookup of a really watched
            # name: a start-up has only armed names, answered above
            from ._spec import resolve

            return resolve(self, fullname, path, target, watch, fire)
        finally:
            busy.discard(fullname)

    def invalidate_caches(self) -> None:
        pass

    def __repr__(self) -> str:
        return "<cudashim import hook>"


FINDER = _Finder()


def _ensure_finder() -> None:
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)


def installed() -> bool:
    return FINDER in sys.meta_path


def fire(name: str, module: "ModuleType") -> None:
    """Run the callbacks watching `name` (once-callbacks are consumed). Errors surface after all ran."""
    with _lock:
        watch = _watched.get(name)
        if watch is None:
            return
        callbacks = watch.always + watch.once
        watch.once = []
        watch.quiet = False
        if watch.empty():
            del _watched[name]
    error: BaseException | None = None
    for cb in callbacks:
        try:
            cb(module)
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the other callbacks ran
            error = error or e
    if error is not None:
        raise error


def loading(module_name: str) -> bool:
    """Whether `module_name`'s code is running now through the hook's loader (a module it watches,
    imported and not yet finished: when_imported() then waits for the end of that import)."""
    w = _watched.get(module_name)
    return w is not None and w.loading


def when_imported(module_name: str, callback: "Callback") -> None:
    """Call callback(module) right after `module_name` finishes loading, or at once if it is loaded."""
    with _lock:
        module = sys.modules.get(module_name)
        if module is None or loading(module_name):
            _watched.setdefault(module_name, _Watch()).once.append(callback)
            _ensure_finder()
            return
    callback(module)


def watch(module_name: str, on_load: "Callback | None" = None, standin: "StandinFactory | None" = None) -> None:
    """Persistent watch (patches): on_load on every load; standin when no finder knows the module."""
    with _lock:
        w = _watched.setdefault(module_name, _Watch())
        if on_load is not None and on_load not in w.always:
            w.always.append(on_load)
        if standin is not None:
            w.standin = standin
        _ensure_finder()


def pause_gc(names: "Iterable[str]") -> None:
    """The next load of each of `names` not yet imported runs with Python's cyclic garbage collector
    paused (as the caller left it afterwards, however the load ends). A large package's import makes
    objects by the million and keeps nearly all of them: the collections its allocations trigger walk
    every object made so far and find almost nothing to free."""
    with _lock:
        for name in names:
            if name not in sys.modules:
                _watched.setdefault(name, _Watch()).quiet = True
                _ensure_finder()


def defer(names: "Iterable[str]", load: "Callable[[], None]") -> Deferred:
    """Arm `names`: the first lookup of any of them calls load() before it is answered.

    load() registers the real watches (watch(), when_imported()). Only one set of names is armed at
    a time: arming again replaces it. When one of `names` is already imported, load() runs at once.
    """
    global _pending
    d = Deferred(names, load)
    with _lock:
        if _pending is not None:
            _pending.cancel()
        for name in d.names:
            _watched.setdefault(name, _Watch()).deferred = True
        _pending = d
        _ensure_finder()
    # Off sys.meta_path at exit, after the program's own atexit handlers: the interpreter keeps that
    # list alive through its finalization, and a finder still on it keeps this module's globals, with
    # every module they reach, alive past the last garbage collection, which costs every exit.
    import atexit

    atexit.register(_remove_finder)
    if any(n in sys.modules for n in d.names):
        d.load()
    return d


def load_armed() -> None:
    """Run the armed load now, if names are armed (the patch registry calls this when first used)."""
    pending = _pending
    if pending is not None:
        pending.load()


def _drop_placeholders() -> None:
    for name in list(_watched):
        w = _watched[name]
        w.deferred = False
        if w.empty():
            del _watched[name]
    if not _watched:
        _remove_finder()


def unwatch_all() -> None:
    """Drop every persistent watch (patches); keep armed names and pending when_imported callbacks."""
    with _lock:
        for name in list(_watched):
            w = _watched[name]
            w.always = []
            w.standin = None
            if w.empty():
                del _watched[name]
        if not _watched:
            _remove_finder()


def clear() -> None:
    """Forget everything (armed names too) and take the finder off sys.meta_path."""
    with _lock:
        if _pending is not None:
            _pending.cancel()
        _watched.clear()
        _remove_finder()


def _remove_finder() -> None:
    while FINDER in sys.meta_path:
        sys.meta_path.remove(FINDER)
