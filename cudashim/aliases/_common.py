"""Helpers the alias steps share (cpu.py, npu.py): binding with exact undo, backend-name translation.

Nothing here knows which platform it serves.
Every attribute an alias layer replaces goes through Bindings.bind(), the one place where the
migration report hooks in (cudashim.report.wrap when CUDASHIM_REPORT is on, the plain function
otherwise, so the report costs nothing when off).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["Bindings", "translate_backend", "wrap_args", "when_imported"]

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
