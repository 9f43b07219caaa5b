"""The launch seam binds a kernel's arguments as Python binds a call: by position and by name, defaults
applied, in the parameters' order, launch options (keywords that are no parameter) dropped; a missing or
doubly given argument is the signature's TypeError, naming the kernel."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from cudashim.triton_route import launch


class _Kernel:
    def __init__(self, fn: Any) -> None:
        self.fn = fn


def _plain(x_ptr: Any, out_ptr: Any, n: Any, BLOCK: Any = 64, flag: Any = None) -> None: ...


def _keyword_only(x_ptr: Any, *, n: Any = 3) -> None: ...


def _expected(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    sig = inspect.signature(fn)
    b = sig.bind(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
    b.apply_defaults()
    return list(b.arguments.items())


@pytest.mark.parametrize("args,kwargs", [
    ((1, 2, 3), {}),
    ((1, 2, 3, 128), {"num_warps": 4}),
    ((1,), {"n": 7, "out_ptr": 2, "flag": True, "num_stages": 2}),
    ((), {"BLOCK": 16, "n": 5, "out_ptr": 2, "x_ptr": 1}),
    ((1, 2, 3, 4, 5), {}),
])
def test_bound_as_python_binds(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    bound = launch._bind(_Kernel(_plain), args, kwargs, "k")
    assert list(bound.items()) == _expected(_plain, args, kwargs)  # values and order


@pytest.mark.parametrize("args,kwargs", [((1, 2), {}), ((1, 2, 3), {"x_ptr": 9}), ((1, 2, 3, 4, 5, 6), {})])
def test_bad_calls_are_the_signatures_error(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="Triton kernel k: "):
        launch._bind(_Kernel(_plain), args, kwargs, "k")


def test_other_parameter_kinds_take_the_signature() -> None:
    assert launch._bind(_Kernel(_keyword_only), (1,), {"n": 4}, "k") == {"x_ptr": 1, "n": 4}
    assert launch._bind(_Kernel(_keyword_only), (1,), {}, "k") == {"x_ptr": 1, "n": 3}
