"""The import hook against throwaway packages made in tmp_path, each test in a fresh interpreter."""

from __future__ import annotations

from typing import Callable

Run = Callable[..., str]

TARGET = {
    "tgt/__init__.py": """
        CONST = 1
        class Thing:
            kind = "original"
        def f(x):
            return ("orig", x)
        def g(x):
            return f(x)          # reaches f through the module globals
    """,
    "repl.py": """
        import sys
        IMPORTED = True
        CONST = 2
        class Thing:
            kind = "replacement"
        def f(x):
            return ("repl", x)
    """,
}


def test_both_import_forms_lazy_and_identity(shim: Run) -> None:
    out = shim("""
        patches.install(cfg(("tgt:f", "repl:f")), "cpu")
        import tgt
        assert "repl" not in sys.modules, "replacement imported before first access"
        assert type(tgt) is not types.ModuleType            # a lazy attribute is pending
        from tgt import f
        import repl
        assert f is repl.f and tgt.f is repl.f              # the real object, no proxy
        assert tgt.__dict__["f"] is repl.f
        assert type(tgt) is types.ModuleType                # nothing pending: the class is plain again
        assert f(3) == ("repl", 3)
        [st] = [s for s in patches.status() if s["target"] == "tgt:f"]
        assert st["state"] == "applied" and st["resolved"] and st["source"] == "test:tgt:f"
        print("OK")
    """, TARGET)
    assert "OK" in out


def test_internal_global_call_sees_replacement_before_any_access(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:f", "repl:f")), "cpu")
        import tgt
        assert tgt.__dict__["g"](5) == ("repl", 5)   # g -> f through globals: a trampoline resolved it
        import repl
        assert tgt.__dict__["f"] is repl.f           # and the trampoline is gone
    """, TARGET)


def test_target_imported_before_install_is_patched_and_holders_rebound(shim: Run) -> None:
    shim("""
        import tgt
        from tgt import f as kept_alias
        holder = types.ModuleType("holder"); sys.modules["holder"] = holder
        exec("from tgt import f", holder.__dict__)
        orig = tgt.f
        patches.install(cfg(("tgt:f", "repl:f")), "cpu")
        import repl
        assert tgt.f is repl.f
        assert holder.f is repl.f, "from-import holder was not re-bound"
        [st] = [s for s in patches.status() if s["target"] == "tgt:f"]
        assert "holder" in st["rebound"] and st["state"] == "applied"
        assert patches.original("tgt:f") is orig
        patches.uninstall()
        assert tgt.f is orig and holder.f is orig
    """, TARGET)


def test_nested_packages(shim: Run) -> None:
    shim("""
        patches.install(cfg(("a.b.c:f", "repl:f"), ("a.b:CONST", "repl:CONST")), "cpu")
        from a.b.c import f
        import a.b.c, repl
        assert f is repl.f and a.b.c.f is repl.f
        import a.b
        assert a.b.CONST == 2
        assert a.b.c.other() == "other"             # untouched neighbours stay
    """, {
        "a/__init__.py": "",
        "a/b/__init__.py": "CONST = 1\n",
        "a/b/c.py": "def f(): return 'orig'\ndef other(): return 'other'\n",
        "repl.py": TARGET["repl.py"],
    })


def test_standin_for_absent_package(shim: Run) -> None:
    shim("""
        patches.install(cfg(("ghost_pkg.inner.mod:f", "repl:f"), ("ghost_pkg:top", "repl:f")), "cpu")
        spec = importlib.util.find_spec("ghost_pkg")
        assert spec is not None and spec.name == "ghost_pkg" and spec.submodule_search_locations == []
        from ghost_pkg.inner.mod import f
        import repl, ghost_pkg
        assert f is repl.f and ghost_pkg.top is repl.f
        assert ghost_pkg.inner.mod.__spec__.name == "ghost_pkg.inner.mod"
        assert importlib.util.find_spec("ghost_pkg.inner.mod") is ghost_pkg.inner.mod.__spec__
        try:
            ghost_pkg.inner.mod.flash_bwd
        except AttributeError as e:
            msg = str(e)
        else:
            raise AssertionError("no error for an unpatched symbol")
        for part in ("ghost_pkg.inner.mod.flash_bwd", "platform cpu", "[tool.cudashim.patches.cpu]",
                     '"ghost_pkg.inner.mod:flash_bwd" = "your.module:flash_bwd"', "only f"):
            assert part in msg, (part, msg)
        try:
            from ghost_pkg.inner.mod import missing_one
        except ImportError:
            pass
        else:
            raise AssertionError("from-import of an unpatched stand-in symbol succeeded")
        assert not hasattr(ghost_pkg, "__file__")
        ns = {}
        exec("from ghost_pkg.inner.mod import *", ns)
        assert ns["f"] is repl.f and "flash_bwd" not in ns
        st = {s["target"]: s["state"] for s in patches.status()}
        assert st["ghost_pkg.inner.mod:f"] == "stood-in" and st["ghost_pkg:top"] == "stood-in"
        patches.uninstall()
        assert not any(n.startswith("ghost_pkg") for n in sys.modules)
        assert importlib.util.find_spec("ghost_pkg") is None
    """, {"repl.py": TARGET["repl.py"]})


WRAP = "from tgt import f as _real\ndef f(x):\n    return ('wrapped', _real(x))\n"


def test_replacement_delegates_to_original(shim: Run) -> None:
    shim("""
        import cudashim
        patches.install(cfg(("tgt:f", "wrap:f")), "cpu")
        from tgt import f
        import wrap
        assert f is wrap.f
        assert f(2) == ("wrapped", ("orig", 2))      # the replacement's own `from tgt import f` got the original
        assert cudashim.original("tgt:f") is wrap._real
        assert wrap._real.__code__.co_filename.endswith("__init__.py")
    """, {**TARGET, "wrap.py": WRAP})


def test_replacement_imported_first_still_gets_original(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:f", "wrap:f")), "cpu")
        import wrap                                   # imports tgt while wrap is half-initialised
        import tgt
        assert tgt.f is wrap.f and wrap._real(1) == ("orig", 1)
    """, {**TARGET, "wrap.py": WRAP})


def test_standin_has_no_original(shim: Run) -> None:
    shim("""
        patches.install(cfg(("ghost2:f", "repl:f")), "cpu")
        try:
            patches.original("ghost2:f")
        except patches.PatchError as e:
            assert "not installed" in str(e) and "cpu" in str(e)
        else:
            raise AssertionError("original of a stand-in")
    """, {"repl.py": TARGET["repl.py"]})


def test_class_and_constant_patch(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:Thing", "repl:Thing"), ("tgt:CONST", "repl:CONST")), "cpu")
        from tgt import Thing, CONST
        import tgt, repl
        assert Thing is repl.Thing and isinstance(Thing(), repl.Thing) and Thing.kind == "replacement"
        assert CONST == 2 and tgt.CONST == 2
        patches.uninstall()
        assert tgt.Thing.kind == "original" and tgt.CONST == 1
    """, TARGET)


def test_threads_import_concurrently(shim: Run) -> None:
    out = shim("""
        import threading
        patches.install(cfg(("tgt:f", "slowrepl:f"), ("tgt2.sub:h", "slowrepl:h")), "cpu")
        n = 8
        barrier = threading.Barrier(n)
        seen, errors = [], []
        def worker(i):
            try:
                barrier.wait()
                if i % 2:
                    from tgt import f
                    from tgt2.sub import h
                else:
                    import tgt, tgt2.sub
                    f, h = tgt.f, tgt2.sub.h
                seen.append((f, h))
            except BaseException as e:
                errors.append(e)
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        for t in ts: t.start()
        for t in ts: t.join(30)
        assert not any(t.is_alive() for t in ts), "deadlock"
        assert not errors, errors
        import slowrepl
        assert len(seen) == n and all(f is slowrepl.f and h is slowrepl.h for f, h in seen)
        assert slowrepl.LOADS == 1
        print("OK")
    """, {
        **TARGET,
        "tgt2/__init__.py": "",
        "tgt2/sub.py": "import time\ntime.sleep(0.05)\ndef h(): return 'orig'\n",
        "slowrepl.py": "import time\nLOADS = 1\ntime.sleep(0.1)\ndef f(x): return 'slow'\ndef h(): return 'slow-h'\n",
    })
    assert "OK" in out


def test_uninstall_restores_everything_and_is_idempotent(shim: Run) -> None:
    shim("""
        import tgt
        before = dict(tgt.__dict__)
        meta = list(sys.meta_path)
        c = cfg(("tgt:f", "repl:f"), ("tgt:Thing", "repl:Thing"), ("tgt:NEW", "repl:CONST"))
        patches.install(c, "cpu")
        patches.install(c, "cpu")                     # idempotent
        assert sum(type(f).__name__ == "_Finder" for f in sys.meta_path) == 1
        assert tgt.f(1) == ("repl", 1) and tgt.NEW == 2
        patches.uninstall()
        patches.uninstall()                           # idempotent
        assert sys.meta_path == meta
        assert type(tgt) is types.ModuleType
        assert dict(tgt.__dict__) == before and all(tgt.__dict__[k] is v for k, v in before.items())
        assert not hasattr(tgt, "NEW")
        # and a fresh import after uninstall is the plain module
        del sys.modules["tgt"]
        import tgt as again
        assert again.f(1) == ("orig", 1)
    """, TARGET)


def test_when_imported_fires_once_after_load_or_at_once(shim: Run) -> None:
    shim("""
        calls = []
        importhook.when_imported("tgt", lambda m: calls.append(("late", m.__name__, hasattr(m, "g"))))
        assert calls == []
        import tgt
        assert calls == [("late", "tgt", True)]      # after the module's code ran
        del sys.modules["tgt"]; import tgt
        assert len(calls) == 1                       # once
        importhook.when_imported("tgt", lambda m: calls.append(("now", m.__name__, True)))
        assert calls[-1] == ("now", "tgt", True)
        from cudashim import importhook as _hook
        assert _hook.FINDER.find_spec("json") is None  # not watched: bail out
    """, TARGET)


def test_disable_by_pack_and_by_key(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:f", "repl:f"), ("tgt:CONST", "repl:CONST"), disable=("deep_select", "tgt:CONST")), "cpu")
        targets = {s["target"] for s in patches.status()}
        assert "deep_select.interface:topk" not in targets and "tgt:CONST" not in targets
        assert "flash_attn:flash_attn_func" in targets and "tgt:f" in targets
        import tgt
        assert tgt.CONST == 1
        assert importlib.util.find_spec("deep_select") is None
    """, TARGET)


def test_nvidia_builtin_only_where_target_absent(shim: Run) -> None:
    shim("""
        patches.install(cfg(), "nvidia")
        import deep_select.interface as real
        assert real.topk() == "real topk" and type(real) is types.ModuleType
        import flash_attn                               # absent here: stood in
        from cudashim.patches import _standin
        assert _standin.is_standin(flash_attn)
        st = {s["target"]: s["state"] for s in patches.status()}
        assert st["deep_select.interface:topk"] == "native"
        assert st["flash_attn:flash_attn_func"] == "stood-in"
        assert patches.original("deep_select.interface:topk") is real.topk
        patches.uninstall()
        patches.install(cfg(), "cpu")                  # on cpu the same built-in applies to the real module
        st = {s["target"]: s["state"] for s in patches.status()}
        assert st["deep_select.interface:topk"] == "applied"
        assert patches.original("deep_select.interface:topk")() == "real topk"
    """, {
        "deep_select/__init__.py": "",
        "deep_select/interface.py": "def topk(): return 'real topk'\n",
    })


def test_broken_replacement_fails_loudly(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:f", "repl:nope")), "cpu")
        try:
            from tgt import f
        except patches.PatchError as e:
            assert "'repl' has no attribute 'nope'" in str(e) and "CUDASHIM_DISABLE_PATCHES=tgt:f" in str(e)
        else:
            raise AssertionError("a missing replacement passed silently")
    """, TARGET)


def test_dotted_symbol_patches_a_method(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:Thing.meth", "repl:f")), "cpu")
        import tgt, repl
        assert tgt.Thing.meth is repl.f
        patches.uninstall()
        assert not hasattr(tgt.Thing, "meth")
    """, TARGET)


def test_namespace_package_target(shim: Run) -> None:
    shim("""
        patches.install(cfg(("nspkg:f", "repl:f")), "cpu")
        import nspkg, repl
        assert nspkg.f is repl.f and list(nspkg.__path__)
        import nspkg.leaf
        assert nspkg.leaf.VALUE == 7
    """, {"nspkg/leaf.py": "VALUE = 7\n", "repl.py": TARGET["repl.py"]})


def test_reload_of_target_is_patched_again(shim: Run) -> None:
    shim("""
        patches.install(cfg(("tgt:f", "repl:f")), "cpu")
        import tgt, repl
        assert tgt.f is repl.f
        old_original = patches.original("tgt:f")
        importlib.reload(tgt)
        assert tgt.f is repl.f
        assert patches.original("tgt:f") is not old_original   # the re-executed original
        assert patches.original("tgt:f")(1) == ("orig", 1)
    """, TARGET)


def test_builtin_packs_resolve_to_replacements_on_cpu(shim: Run) -> None:
    """Every built-in target, stood in on cpu, hands out exactly the object its pack names."""
    out = shim("""
        from cudashim.patches import PACKS
        patches.install(cfg(), "cpu")
        n = 0
        for pack, mapping in PACKS.items():
            for target, repl in mapping.items():
                mod, sym = target.split(":")
                rmod, rsym = repl.split(":")
                got = getattr(importlib.import_module(mod), sym)
                assert got is getattr(importlib.import_module(rmod), rsym), (target, got)
                assert rmod.startswith("cudashim.replacements.")
                n += 1
        assert all(s["state"] == "stood-in" and s["resolved"] for s in patches.status())
        print("OK", n)
    """, timeout=300)
    assert "OK 8" in out


def test_package_reexporting_a_patched_submodule_symbol(shim: Run) -> None:
    shim("""
        patches.install(cfg(("rx:f", "repl:f"), ("rx.impl:f", "repl:f")), "cpu")
        import rx, repl
        import rx.impl
        assert rx.f is repl.f and rx.impl.f is repl.f
        real = patches.original("rx.impl:f")
        assert real() == ("orig", 0)
        assert patches.original("rx:f") is real       # not the replacement the package picked up
        patches.uninstall()
        assert rx.f is real and rx.impl.f is real
    """, {"rx/__init__.py": "from rx.impl import f\n", "rx/impl.py": "def f():\n    return ('orig', 0)\n",
          "repl.py": TARGET["repl.py"]})


def test_threads_resolving_a_replacement_beside_the_config(shim: Run) -> None:
    """A replacement module beside the config is loaded from the config's folder: two threads reaching
    the patched name at once must both get the replacement, never the module half-run (no
    PatchError "'slowrepl' has no attribute 'f'") nor run twice."""
    out = shim("""
        import os, threading
        from pathlib import Path
        folder = Path("proj").resolve()
        conf = Config(path=folder / "cudashim.toml", patches=(PatchEntry("tgt:f", "slowrepl:f", None, "test"),))
        patches.install(conf, "cpu")
        import tgt
        n = 6
        barrier = threading.Barrier(n)
        seen, errors = [], []
        def worker():
            try:
                barrier.wait()
                seen.append(tgt.f)
            except BaseException as e:
                errors.append(e)
        ts = [threading.Thread(target=worker) for _ in range(n)]
        for t in ts: t.start()
        for t in ts: t.join(30)
        assert not any(t.is_alive() for t in ts), "deadlock"
        assert not errors, errors
        slowrepl = sys.modules["slowrepl"]
        assert sys.modules["slowrepl"].__file__ == str(folder / "slowrepl.py")
        assert len(seen) == n and all(f is slowrepl.f for f in seen), seen
        assert slowrepl.f(1) == "slow" and open("loads.txt").read() == "x"
        print("OK")
    """, {
        **TARGET,
        "proj/cudashim.toml": "",
        "proj/slowrepl.py": "import time\nopen('loads.txt', 'a').write('x')\ntime.sleep(0.3)\ndef f(x): return 'slow'\n",
    })
    assert "OK" in out
