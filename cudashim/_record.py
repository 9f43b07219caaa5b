"""A small immutable record: what `@dataclass(frozen=True)` gives, without importing dataclasses.

Every shimmed interpreter imports the modules on the bootstrap path (config, envs, hardware
detection) before user code; `dataclasses` alone pulls in inspect, ast, dis and tokenize, several
milliseconds of start-up for a handful of value classes. A subclass names its fields in `__slots__`
and optional defaults in `_defaults`; it gets positional/keyword construction with dataclass-style
TypeErrors, equality and hashing by value (same class only), a dataclass-style repr, `_replace()`,
and pickling/copying.
"""

from __future__ import annotations

__all__ = ["Record"]


class Record:
    __slots__: tuple[str, ...] = ()
    _defaults: dict[str, object] = {}

    def __init__(self, *args: object, **kwargs: object) -> None:
        names = self.__slots__
        if not kwargs and len(args) == len(names):  # the common case, kept cheap (tables at import)
            for name, value in zip(names, args):
                object.__setattr__(self, name, value)
            return
        cls = type(self).__name__
        if len(args) > len(names):
            raise TypeError(f"{cls}() takes {len(names)} arguments but {len(args)} were given")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{cls}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{cls}() got multiple values for argument {key!r}")
            values[key] = value
        defaults = self._defaults
        for name in names:
            if name in values:
                value = values[name]
            elif name in defaults:
                value = defaults[name]
            else:
                raise TypeError(f"{cls}() missing required argument: {name!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use _replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _astuple(self) -> tuple[object, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def _replace(self, **changes: object) -> Record:
        """A copy with `changes` applied (dataclasses.replace)."""
        values = dict(zip(self.__slots__, self._astuple()))
        values.update(changes)
        return type(self)(**values)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return other._astuple() == self._astuple()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"

    def __reduce__(self) -> tuple[object, ...]:
        # slots plus a refusing __setattr__ would break pickle's default state restore (and copy)
        return (type(self), self._astuple())
