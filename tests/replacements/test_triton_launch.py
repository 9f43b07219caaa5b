"""FastLaunch's bookkeeping (replacements/_triton_launch.py) on CPU, against a stand-in JIT function and
compiled kernel that record what they are handed.

What it proves: the first call of a specialization goes through the JIT, later ones through the
compiled kernel's launcher with the arguments JITFunction.run would hand it; whatever the JIT
specializes on (a dtype, 16-byte alignment, an int equal to 1 or a multiple of 16, a constexpr, a
launch option) makes another key; launch hooks, an unaligned tensor and a launcher that refuses the
arguments send the call to the JIT. What it does not prove: that a real launcher launches the right
thing — tests/gpu/test_replacements_gpu.py compares the fast launch bit for bit with Triton's own.
"""

from __future__ import annotations

import types

import pytest
import torch

pytest.importorskip("triton")

from cudashim.replacements import _triton_launch as tl_launch  # noqa: E402


class Compiled:
    function = "fn-handle"
    packed_metadata = "metadata"

    def __init__(self, log: list, refuse: bool = False) -> None:
        self.log, self.refuse = log, refuse

    def run(self, *a):
        if self.refuse:
            raise TypeError("function takes exactly 20 arguments")
        self.log.append(("fast", a))


class Jit:
    """`jit[grid](*args, **kw)` as Triton's: launches and returns the compiled kernel."""

    def __init__(self, refuse: bool = False) -> None:
        self.log: list = []
        self.refuse = refuse

    def __getitem__(self, grid):
        def launch(*args, **kw):
            self.log.append(("jit", grid, args, kw))
            return Compiled(self.log, self.refuse)
        return launch


@pytest.fixture
def launcher(monkeypatch):
    monkeypatch.setattr(tl_launch, "driver", types.SimpleNamespace(active=types.SimpleNamespace(
        get_current_device=lambda: 0, get_current_stream=lambda device: 777)))
    monkeypatch.setattr(tl_launch, "_HOOKS", types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None))

    def make(refuse: bool = False):
        jit = Jit(refuse)
        fl = tl_launch.FastLaunch(jit, 2)
        fl._jit = True  # a stand-in is not a triton JITFunction; the real check is isinstance
        return fl, jit.log
    return make


def _kinds(log):
    return [entry[0] for entry in log]


def test_jit_once_per_key_then_the_launcher_with_jitfunction_run_s_arguments(launcher):
    fl, log = launcher()
    a, b = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    consts = dict(D=128, MODE=2)
    fl((4, 8, 1), (a, b, 0.5, 32), consts, num_warps=4)
    fl((2, 8, 3), (a, b, 0.25, 48), consts, num_warps=4)  # 48: still a multiple of 16, not 1
    assert _kinds(log) == ["jit", "fast"] and fl.fast_launches == 1
    assert log[0][1:] == ((4, 8, 1), (a, b, 0.5, 32), dict(D=128, MODE=2, num_warps=4))
    grid_and_handles, rest = log[1][1][:9], log[1][1][9:]
    assert grid_and_handles == (2, 8, 3, 777, "fn-handle", "metadata", None, None, None)
    expected = (a, b, 0.25, 48) + ((128, 2) if tl_launch._ALL_ARGS else ())
    assert len(rest) == len(expected) and all(x is y or x == y for x, y in zip(rest, expected))


@pytest.mark.parametrize("change", ["int is 1", "int not a multiple of 16", "dtype", "constexpr", "option",
                                    "unaligned"])
def test_what_the_jit_specializes_on_is_another_key(launcher, change):
    fl, log = launcher()
    a, b = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    consts, opts, args = dict(D=128), dict(num_warps=4), [a, b, 0.5, 32]
    fl((1, 1, 1), tuple(args), consts, **opts)
    fl((1, 1, 1), tuple(args), consts, **opts)
    assert _kinds(log) == ["jit", "fast"]
    if change == "int is 1":
        args[3] = 1
    elif change == "int not a multiple of 16":
        args[3] = 33
    elif change == "dtype":
        args[0] = a.half()
    elif change == "constexpr":
        consts = dict(D=64)
    elif change == "option":
        opts = dict(num_warps=8)
    else:  # a view 4 bytes in: not 16-byte aligned, never cached
        args[0] = torch.zeros(65)[1:]
        assert args[0].data_ptr() % 16
    fl((1, 1, 1), tuple(args), consts, **opts)
    fl((1, 1, 1), tuple(args), consts, **opts)
    assert _kinds(log)[2:] == (["jit", "jit"] if change == "unaligned" else ["jit", "fast"])


def test_launch_hooks_send_every_call_to_the_jit(launcher, monkeypatch):
    fl, log = launcher()
    a, b = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    fl((1, 1, 1), (a, b, 0.5, 32), {}, num_warps=4)
    chain = types.SimpleNamespace(calls=[lambda *x: None])  # a profiler's hook, as Triton's HookChain
    monkeypatch.setattr(tl_launch, "_HOOKS", types.SimpleNamespace(launch_enter_hook=chain, launch_exit_hook=None))
    fl((1, 1, 1), (a, b, 0.5, 32), {}, num_warps=4)
    chain.calls.clear()  # an empty chain is no hook
    fl((1, 1, 1), (a, b, 0.5, 32), {}, num_warps=4)
    assert _kinds(log) == ["jit", "jit", "fast"]


def test_a_launcher_that_refuses_the_arguments_leaves_the_kernel_on_the_jit_path(launcher):
    fl, log = launcher(refuse=True)
    a, b = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    for _ in range(3):
        fl((1, 1, 1), (a, b, 0.5, 32), {}, num_warps=4)
    # the second call tried the launcher, which refused before launching: that call and every later
    # one are the JIT's
    assert _kinds(log) == ["jit", "jit", "jit"] and fl.fast_launches == 0 and not fl._jit
