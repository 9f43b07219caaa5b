"""Helpers the alias steps share (cpu.py, npu.py): binding with exact undo.

Nothing here knows which platform it serves.
Every attribute an installer replaces goes through Bindings.bind(), the one place where the
migration report hooks in (cudashim.report.wrap when CUDASHIM_REPORT is on, the plain function
otherwise, so the report costs nothing when off).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["Bindings", "when_imported"]

# the one import hook's: installers register post-import callbacks there, as patches do
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


