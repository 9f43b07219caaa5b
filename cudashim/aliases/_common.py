"""Helpers every alias layer shares (cpu here, ascend in npu.py): binding with exact undo, and
device-argument rewriting parametrised by the target device type.

Nothing here knows which platform it serves: the target ("cpu", "npu") is an argument.
Every attribute an alias layer replaces goes through Bindings.bind(), the one place where the
migration report hooks in (cudashim.report.wrap when CUDASHIM_REPORT is on, the plain function
otherwise, so the report costs nothing when off).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = [
    "Bindings",
    "DeviceRewriter",
    "wrap_factory",
    "discover_factories",
    "translate_backend",
    "map_location_for",
    "wrap_args",
    "when_imported",
]

# the one import hook's: aliases register post-import callbacks there, as patches do
from ..importhook import when_imported  # noqa: E402

_MISSING = object()


def _report_wrap(api: str, treatment: str, value: Any, when: Callable[..., bool] | None = None) -> Any:
    # looked up at bind time only: with the report off the bound object is the plain function
    from .. import report

    if not report.enabled() or not callable(value):
        return value
    return report.wrap(api, treatment, value, when) if when is not None else report.wrap(api, treatment, value)


class Bindings:
    """Attributes replaced on modules and classes, each restorable exactly.

    An attribute a class only inherited (Tensor.is_cuda comes from TensorBase) is deleted on
    restore rather than re-set, so the class's own __dict__ is what it was before.
    """

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        self._seen: set[tuple[int, str]] = set()

    def bind(self, owner: Any, attr: str, value: Any, api: str | None = None, treatment: str = "aliased",
             when: Callable[..., bool] | None = None) -> None:
        key = (id(owner), attr)
        if key not in self._seen:  # the first original wins: re-binding never loses it
            self._seen.add(key)
            self._saved.append((owner, attr, vars(owner).get(attr, _MISSING)))
        if api is not None and not isinstance(value, property):
            value = _report_wrap(api, treatment, value, when)
        setattr(owner, attr, value)

    def original(self, owner: Any, attr: str) -> Any:
        for o, a, v in self._saved:
            if o is owner and a == attr:
                return getattr(owner, attr) if v is _MISSING else v
        return getattr(owner, attr)

    def restore(self) -> None:
        while self._saved:
            owner, attr, value = self._saved.pop()
            if value is _MISSING:
                try:
                    delattr(owner, attr)
                except AttributeError:
                    pass
            else:
                setattr(owner, attr, value)
        self._seen.clear()

    def __len__(self) -> int:
        return len(self._saved)


class DeviceRewriter:
    """Maps what CUDA code passes as a device to the target device.

    "cuda", "cuda:N", torch.device("cuda", N) and bare ints (torch reads an int as a CUDA index)
    become the target; with keep_index the index survives ("cuda:1" -> "npu:1"), without it every
    CUDA device is the one target device ("cuda:1" -> "cpu"). Anything else passes unchanged.
    Results are cached per argument, so the hot path is one dict lookup.
    """

    def __init__(self, torch: Any, target: str, keep_index: bool = False, refuse: str | None = None) -> None:
        self._torch = torch
        self.target = target
        self.keep_index = keep_index
        self.target_device = torch.device(target)
        # with no device visible (CUDA_VISIBLE_DEVICES='' ...), every CUDA device is refused with this
        # message, as CUDA refuses it, rather than landing on the target anyway
        self.refuse = refuse
        self._cache: dict[Any, Any] = {}
        warms = ("cpu", torch.device("cpu")) if refuse else (
            "cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0), 0, "cpu", torch.device("cpu"))
        for warm in warms:
            self(warm)

    def __call__(self, dev: Any) -> Any:
        try:
            hit = self._cache.get(dev)
        except TypeError:  # unhashable: nothing CUDA-like
            return dev
        if hit is None:
            hit = self._compute(dev)
            hit = dev if hit is None else hit
            if len(self._cache) < 4096:
                self._cache[dev] = hit
        return hit

    @property
    def cache(self) -> dict[Any, Any]:
        """arg -> rewritten arg (the arg itself when unchanged), for hot paths: `cache.get(d) or rw(d)`."""
        return self._cache

    def index_of(self, dev: Any) -> int | None:
        """The CUDA index named by dev (None when it names none or is not a CUDA device)."""
        if isinstance(dev, bool):
            return None
        if isinstance(dev, int):
            return dev
        if isinstance(dev, str):
            if dev == "cuda":
                return None
            if dev.startswith("cuda:"):
                return int(dev[5:])
            return None
        if isinstance(dev, self._torch.device) and dev.type == "cuda":
            return dev.index
        return None

    def is_cuda(self, dev: Any) -> bool:
        if isinstance(dev, bool):
            return False
        if isinstance(dev, int):
            return True
        if isinstance(dev, str):
            return dev == "cuda" or dev.startswith("cuda:")
        return isinstance(dev, self._torch.device) and dev.type == "cuda"

    def _compute(self, dev: Any) -> Any:
        # None means "leave as it was"
        if not self.is_cuda(dev):
            return None
        if self.refuse is not None:
            raise RuntimeError(self.refuse)
        if not self.keep_index:
            return self.target if isinstance(dev, str) else self.target_device
        idx = self.index_of(dev)
        if isinstance(dev, str):
            return self.target if idx is None else f"{self.target}:{idx}"
        return self._torch.device(self.target, idx) if idx is not None else self.target_device


def cuda_device_given(rewrite: DeviceRewriter, positional: int | None = None) -> Callable[..., bool]:
    """For the report: whether a factory call was given a CUDA device (by keyword, or at `positional`)."""

    def given(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        d = kwargs.get("device")
        if d is None and positional is not None and len(args) > positional:
            d = args[positional]
        return d is not None and rewrite.is_cuda(d)

    return given


def wrap_factory(fn: Callable[..., Any], rewrite: DeviceRewriter, *, positional: int | None = None,
                 drop_pin_memory: bool = True) -> Callable[..., Any]:
    """fn with its device= (and optionally one positional device) rewritten, pin_memory=True dropped.

    pin_memory is dropped because a target without page-locked host memory (the cpu) makes it an
    error; copies just stay pageable.
    """

    cache = rewrite.cache
    if positional is None:
        @functools.wraps(fn)
        def factory(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                d = kwargs.get("device")
                if d is not None:
                    kwargs["device"] = cache.get(d) or rewrite(d)
                if drop_pin_memory and kwargs.get("pin_memory"):
                    kwargs["pin_memory"] = False
            return fn(*args, **kwargs)
    else:
        @functools.wraps(fn)
        def factory(*args: Any, **kwargs: Any) -> Any:
            if len(args) > positional:
                args = args[:positional] + (rewrite(args[positional]),) + args[positional + 1:]
            if kwargs:
                d = kwargs.get("device")
                if d is not None:
                    kwargs["device"] = rewrite(d)
                if drop_pin_memory and kwargs.get("pin_memory"):
                    kwargs["pin_memory"] = False
            return fn(*args, **kwargs)

    factory.__cudashim_wrapped__ = fn  # type: ignore[attr-defined]
    return factory


def discover_factories(torch: Any) -> list[tuple[Any, str]]:
    """(namespace, name) of every torch function that takes device=, found from torch itself.

    The device constructors torch's own DeviceContext uses, plus the *_like family; each is located
    in every public namespace that exposes it (torch, torch.fft, torch.nested, torch.sparse ...).
    """
    fns: set[Any] = set()
    try:
        from torch.utils._device import _device_constructors

        fns.update(_device_constructors())
    except Exception:  # older torch: fall back to the *_like scan plus the common constructors
        for n in ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "tensor", "eye"):
            fns.add(getattr(torch, n))
    for n in dir(torch):
        if n.endswith("_like") and not n.startswith("_"):
            fns.add(getattr(torch, n))
    namespaces = [torch] + [getattr(torch, ns) for ns in ("fft", "nested", "sparse", "special", "linalg")
                            if hasattr(torch, ns)]
    found: list[tuple[Any, str]] = []
    for ns in namespaces:
        for name, value in list(vars(ns).items()):
            if name.startswith("_"):
                continue
            try:
                if value in fns:
                    found.append((ns, name))
            except TypeError:
                continue
    return found


def translate_backend(backend: Any, mapping: dict[str, str]) -> Any:
    """Rewrite a process-group backend: "nccl" -> mapping["nccl"]; "cpu:gloo,cuda:nccl" forms too.

    A device-keyed string whose backends all become one name collapses to that name ("gloo").
    """
    if backend is None:
        return None
    text = str(backend)
    low = text.lower()
    if ":" not in low:
        return mapping.get(low, backend)
    pairs = []
    for part in low.split(","):
        dev, _, be = part.strip().partition(":")
        pairs.append((dev.strip(), mapping.get(be.strip(), be.strip())))
    names = {be for _, be in pairs}
    if len(names) == 1:
        return names.pop()
    seen: dict[str, str] = {}
    for dev, be in pairs:
        seen.setdefault(dev, be)
    return ",".join(f"{d}:{b}" for d, b in seen.items())


def map_location_for(map_location: Any, rewrite: DeviceRewriter, restore: Callable[[Any, str], Any]) -> Any:
    """torch.load's map_location with CUDA locations sent to the target.

    None -> the target (a CUDA checkpoint loads where CUDA tensors live now); a string or device
    -> rewritten; a dict -> applied then rewritten; a callable -> called, and when it returns None
    the location it was given is rewritten. `restore(storage, location)` is torch's
    default_restore_location.
    """
    if map_location is None:
        return rewrite.target
    if isinstance(map_location, (str, rewrite._torch.device, int)) and not isinstance(map_location, bool):
        return rewrite(map_location)
    if isinstance(map_location, dict):
        table = dict(map_location)

        def from_table(storage: Any, location: str) -> Any:
            loc = table.get(location, location)
            return restore(storage, str(rewrite(loc)))

        return from_table
    if callable(map_location):
        user = map_location

        def from_callable(storage: Any, location: str) -> Any:
            result = user(storage, location)
            if result is None:
                return restore(storage, str(rewrite(location)))
            return result

        return from_callable
    return map_location


def wrap_args(fn: Callable[..., Any], rules: dict[str, tuple[int | None, Callable[[Any], Any]]]) -> Callable[..., Any]:
    """fn with some arguments transformed: rules maps a parameter name to (its positional index
    counting from 0, or None if keyword-only; the transform). Used where calls are rare
    (init_process_group, DDP construction), so clarity beats speed here.
    """
    by_index = {i: (n, t) for n, (i, t) in rules.items() if i is not None}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if by_index and args:
            args = tuple(by_index[i][1](a) if i in by_index else a for i, a in enumerate(args))
        for name, (_, transform) in rules.items():
            if name in kwargs:
                kwargs[name] = transform(kwargs[name])
        return fn(*args, **kwargs)

    wrapper.__cudashim_wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper
