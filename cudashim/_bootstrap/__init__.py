"""Switching the shim on in a process, before any user code and before torch (docs/design.md §2-§3).

bootstrap() is what the sitecustomize trampolines call; activate()/deactivate() are the in-code
route. The order is the point:

  config -> platform -> device visibility -> environment -> import hook (armed here, loaded on the
  first lookup of torch, of torch_npu on ascend, or of a patch target: see cudashim.importhook.defer)
  -> the user's own sitecustomize

Since torch 2.5 `import torch` auto-loads torch_npu, which freezes device visibility and reads the
allocator settings, so everything up to the import hook must be settled before torch is imported;
nothing here imports torch. Each step that changes the process records how to undo it: a step that
fails undoes the earlier ones, so a failed bootstrap leaves the process as it found it.

Failure policy: under `cudashim run` (CUDASHIM_STRICT=1) a failure prints one message and exits 2
before user code; under a bare PYTHONPATH activation it warns loudly on stderr and leaves the
process unshimmed, so pip and other tools sharing the environment keep working.

This folder is what `cudashim run` puts first on PYTHONPATH, so keep it to this file and the
trampoline: every module here is importable top-level in every shimmed process.
"""

import os
import sys

# typing, `from __future__ import annotations` and cudashim.errors stay out of every shimmed
# interpreter's start-up (each is one more import): annotations naming typing's names are strings,
# and the errors are imported where one is raised or caught. cudashim.envs is imported where it is
# used: activation needs it (config imports it anyway), a start-up under CUDASHIM_DISABLE=1 does not.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable


__all__ = ["TRAMPOLINE_MARK", "bootstrap", "activate", "deactivate", "status"]

# first line of both trampolines: how the sitecustomize chain recognises (and skips) our own copies
TRAMPOLINE_MARK = "cudashim-trampoline"
# Off ascend, visibility.reconcile() only validates these and narrows a rank's devices with them:
# when neither is set it changes nothing and raises nothing, so the module is not even imported
# (one import fewer in every shimmed start-up on cpu and nvidia). Keep in step with visibility.py.
_RANK_VARS = ("CUDASHIM_DEVICES_PER_RANK", "LOCAL_RANK")
# on cpu, the variables that say how many CUDA devices the program sees: checked before user code
_CPU_DEVICE_VARS = ("CUDASHIM_CPU_DEVICES", "CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE")
# read later, deep in the program (get_distributed_options(); the simulated NPU's count at import
# torch): a malformed value is refused now, before user code, rather than from inside the program
_READ_LATER = ("CUDASHIM_NCCL_NUM_SMS", "CUDASHIM_NPU_DEVICES")


class _Active:
    """What one activation did, and how to take it back (newest first)."""

    def __init__(self, source: str, platform: str, reason: str, config: "Any", config_reason: str, hook: "Any",
                 undo: "list[Callable[[], None]]"):
        self.config_reason = config_reason
        self.source = source
        self.platform = platform
        self.reason = reason
        self.config = config
        self.hook = hook
        self.undo = undo


_active: _Active | None = None
# importlib.machinery.PathFinder and importlib.util.module_from_spec are these objects, from the
# import system's own modules, which every interpreter has loaded at start-up; importing them
# through importlib would load importlib, importlib.util and their imports into every shimmed process
try:
    from _frozen_importlib import module_from_spec as _module_from_spec
    from _frozen_importlib_external import PathFinder as _PathFinder
except ImportError:  # pragma: no cover - an interpreter without CPython's frozen importlib
    from importlib.machinery import PathFinder as _PathFinder
    from importlib.util import module_from_spec as _module_from_spec

_bootstrap_runs = 0  # how many times bootstrap() did its work in this process: 0 or 1
_NEVER = ("not switched on in this process (start it with `python -m cudashim run`, "
          "PYTHONPATH=<the cudashim repo>, or cudashim.activate())")
_off_reason = _NEVER  # why the shim is not active, when it is not (status())
_chained: str | None = None  # origin of the user's sitecustomize we ran


def _flag(name: str) -> bool:
    """A boolean variable read leniently: a malformed value counts as set (it was set on purpose)."""
    if name not in os.environ:
        return False  # what envs.get gives: every flag read here defaults to off (tested)
    from .. import envs

    try:
        return bool(envs.get(name))
    except Exception as err:
        from ..errors import CudashimError

        if not isinstance(err, CudashimError):
            raise
        return True


def _disabled() -> bool:
    """CUDASHIM_DISABLE as envs.get reads it (EnvError when malformed). Unset and "1", the value the
    documentation gives, are answered without importing envs: that start-up only chains the user's
    sitecustomize, and envs (its tables) would be most of what it pays."""
    value = os.environ.get("CUDASHIM_DISABLE")
    if value is None or value == "1":
        return value is not None
    from .. import envs

    return bool(envs.get("CUDASHIM_DISABLE"))


def _trace(msg: str) -> None:
    if _flag("CUDASHIM_DEBUG"):
        sys.stderr.write(f"cudashim[{os.getpid()}]: {msg}\n")


def _warn(msg: str, stacklevel: int | None = None) -> None:
    """A UserWarning (so -W / PYTHONWARNINGS filter it): at the caller of activate() when given a
    stack level, else at no source line (bootstrap warnings have no user line to point at)."""
    import warnings

    if stacklevel is not None:
        warnings.warn(f"cudashim: {msg}", UserWarning, stacklevel=stacklevel + 1)
    else:
        warnings.warn_explicit(f"cudashim: {msg}", UserWarning, "<cudashim bootstrap>", 0, module="cudashim")


def _script_dir() -> str | None:
    """Where the config search starts: pinned by `cudashim run` for the whole process tree, else
    the folder of the script this interpreter runs (sys.argv[0]; '-c'/'-m' and embedders have none)."""
    from .. import envs

    pinned = envs.raw("CUDASHIM_SCRIPT_DIR")
    if pinned:
        return pinned
    argv = getattr(sys, "argv", None) or [""]
    if argv[0] and argv[0] not in ("-c", "-m") and os.path.isfile(argv[0]):
        return os.path.dirname(os.path.abspath(argv[0]))
    return None


def _on_torch(platform: str, module: "Any") -> None:
    from .. import importhook, installers

    if platform == "ascend" and importhook.loading("torch_npu"):
        # a program that imports torch_npu first: torch_npu's first line imports torch, and the
        # installer needs the rest of torch_npu (its npu module, transfer_to_npu's imports), so it
        # waits for torch_npu's own import to end
        importhook.when_imported("torch_npu", lambda npu: installers.install(platform))
        return
    installers.install(platform)


def _load_hook(config: "Any", platform: str) -> None:
    """What the armed names wait for: the patch registry and, once torch loads, the installer."""
    from .. import importhook, installers, patches

    # before the lookup that called this is answered: `import torch_npu` as a program's first import
    # finds the simulated NPU's torch_npu, as `import torch` would have through the installer
    installers.prepare(platform)
    patches.install(config, platform)
    importhook.when_imported("torch", lambda module: _on_torch(platform, module))
    # torch's import (with the device plugins it loads, torch_npu and transfer_to_npu on ascend) and the
    # first torch.compile's (Dynamo, Inductor) are most of a shimmed program's start-up; torch_npu's
    # holds torch's where a program imports it first
    importhook.pause_gc(("torch", "torch._dynamo", "torch._inductor") + (("torch_npu",) if platform == "ascend" else ()))


def _unhook(hook: "Any") -> None:
    """Take back whatever of the hook is in place: the armed names, or the patches and installers."""
    if hook.cancel():
        from .. import installers, patches

        patches.uninstall()  # also drops the pending torch callback
        installers.uninstall()


def _undo_env(changes: list[tuple[str, str | None]]) -> "Callable[[], None]":
    from .. import envs

    return lambda: envs.undo(changes)


def _activate(source: str, *, script_dir: str | None, config_path: str | None = None,
              platform: str | None = None) -> _Active:
    """Run every step, in order; on any failure undo what was done and re-raise.

    This runs before user code in every shimmed interpreter, so it imports only what the steps need
    (no functools, pathlib, typing); tests/subprocess/test_startup_imports.py holds it to that.
    """
    undo: list[Callable[[], None]] = []
    notes: list[str] = []
    try:
        from .. import envs
        from ..config import load_config
        from ..platform import resolve_platform_name

        pinned = os.environ.get("CUDASHIM_CONFIG")
        config = load_config(start=script_dir or None, path=config_path or None)
        if config_path:
            config_reason = f"given explicitly ({source}: --config / config=)"
        elif pinned:
            config_reason = "CUDASHIM_CONFIG names it"
        elif config.path is not None:
            config_reason = (f"the nearest config file upward from {script_dir or 'the working directory'}, "
                             f"within its project (the search stops at the first folder holding .git or a pyproject.toml)")
        else:
            config_reason = (f"no cudashim.toml or pyproject.toml with [tool.cudashim] from "
                             f"{script_dir or 'the working directory'} up to its project root: built-in defaults")
        if config.path is not None and not os.environ.get("CUDASHIM_CONFIG"):
            # pinned, so later load_config() calls (get_platform() searches from the working
            # directory) and child processes read the file this process found next to its script
            undo.append(_undo_env([("CUDASHIM_CONFIG", None)]))
            os.environ["CUDASHIM_CONFIG"] = str(config.path)
        if platform is not None:
            # through the environment, so get_platform() and child processes agree with us
            undo.append(_undo_env([("CUDASHIM_PLATFORM", os.environ.get("CUDASHIM_PLATFORM"))]))
            os.environ["CUDASHIM_PLATFORM"] = platform
        name, reason = resolve_platform_name(config)
        from .. import platform as _platform

        _platform.settle(name)
        undo.append(lambda: _platform.settle(None))
        if (name == "ascend" or any(v in os.environ for v in _RANK_VARS)
                or (name == "cpu" and any(v in os.environ for v in _CPU_DEVICE_VARS))):
            from .. import visibility

            undo.append(_undo_env(visibility.reconcile(name, notes=notes)))
        for var in _READ_LATER:
            if var in os.environ:
                envs.get(var)
        undo.append(_undo_env(envs.apply_platform_env(name, notes=notes)))
        from .. import importhook
        from ..patches.packs import target_modules

        # armed, not loaded (docs/design.md §3 step 5): most shimmed processes (pip, tools, helpers a
        # program spawns) never import torch or a patch target, and never load the patch registry
        # or the installer; loads at once when one of these is loaded (activate() after torch)
        names = target_modules(config, name, packages=True) | {"torch"}
        if name == "ascend":
            names.add("torch_npu")  # a program may import torch_npu before torch (it imports torch itself)
        hook = importhook.defer(names, lambda: _load_hook(config, name))
        undo.append(lambda: _unhook(hook))
        if envs.raw("CUDASHIM_REPORT"):
            from .. import report

            report.enabled()  # decides now and registers the at-exit write, even if nothing is recorded
    except BaseException:
        for fn in reversed(undo):
            try:
                fn()
            except Exception:  # noqa: BLE001 - undo as much as possible; the first error is the story
                pass
        raise
    for note in notes:
        _warn(note)
    _trace(f"{source}: platform={name} ({reason}); config={config.path}")
    return _Active(source, name, reason, config, config_reason, hook, undo)


def _describe(err: BaseException) -> str:
    from ..errors import CudashimError

    if isinstance(err, CudashimError):
        return f"{type(err).__name__}: {err}"
    return (f"internal error {type(err).__name__}: {err} (a bug in cudashim; "
            f"CUDASHIM_DEBUG=1 shows the traceback, CUDASHIM_DISABLE=1 runs without the shim)")


def bootstrap() -> None:
    """Activate the shim for this process from the environment; once per process; never raises.

    Called by the trampolines while `site` imports sitecustomize. CUDASHIM_DISABLE=1 makes it a
    no-op, except that the user's own sitecustomize is still chained (we must never shadow it).
    """
    global _active, _bootstrap_runs, _off_reason
    if _bootstrap_runs:
        return
    _bootstrap_runs += 1
    strict = _flag("CUDASHIM_STRICT")
    try:
        if _disabled():
            _off_reason = "CUDASHIM_DISABLE is set"
            _trace("bootstrap disabled (CUDASHIM_DISABLE)")
        elif _active is None:
            _active = _activate("bootstrap", script_dir=_script_dir())
            _trace("bootstrap done")
    except Exception as err:  # noqa: BLE001 - the failure policy below is the whole point
        _off_reason = f"the bootstrap failed: {_describe(err)}"
        if _flag("CUDASHIM_DEBUG"):
            import traceback

            traceback.print_exc()
        if strict:
            sys.stderr.write(f"cudashim: cannot start: {_describe(err)}\n")
            sys.stderr.flush()
            os._exit(2)  # before user code; nothing to flush or clean up yet
        sys.stderr.write(
            f"cudashim: WARNING: the shim is OFF in this process: {_describe(err)}\n"
            f"cudashim: (activated through PYTHONPATH, so the program continues unshimmed; "
            f"`python -m cudashim run` would stop here instead)\n"
        )
    _chain_user_sitecustomize()


def _is_trampoline(origin: str) -> bool:
    try:
        with open(origin, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return TRAMPOLINE_MARK.encode() in head


def _chain_user_sitecustomize() -> None:
    """Run the next `sitecustomize` on sys.path that is not one of our trampolines, once.

    Python imports only the first sitecustomize it finds, which is ours; without this a user's
    (or the distribution's) would silently never run. After it ran it is sys.modules['sitecustomize'],
    as it would have been without the shim.
    """
    global _chained
    if _chained is not None:
        return
    _chained = ""
    running = sys.modules.get("sitecustomize")
    loaded = getattr(running, "__file__", None)
    # a trampoline says so (no need to read its file again); an older copy is recognised by its mark
    if loaded and not (getattr(running, "__cudashim_trampoline__", False) or _is_trampoline(loaded)):
        return  # bootstrap() called from code, after `site` already ran the user's file: not twice
    for entry in list(sys.path):
        try:
            spec = _PathFinder.find_spec("sitecustomize", [entry])
        except (ImportError, OSError, ValueError):
            continue
        # the running trampoline (`loaded`, read above) is not read twice
        if (spec is None or spec.origin is None or spec.loader is None or spec.origin == loaded
                or _is_trampoline(spec.origin)):
            continue
        _chained = spec.origin
        _run_sitecustomize(spec)
        return


def _run_sitecustomize(spec: "Any") -> None:
    ours = sys.modules.get("sitecustomize")
    module = _module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - reported exactly as site.py reports a failing sitecustomize
        if ours is not None:
            sys.modules["sitecustomize"] = ours
        else:
            sys.modules.pop("sitecustomize", None)
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(err).__name__}: {err}\n")
    _trace(f"chained sitecustomize {spec.origin}")


def activate(platform: str | None = None, *, config: str | os.PathLike[str] | None = None) -> str | None:
    """Switch the shim on from code: the bootstrap's steps, in this process, without exec.

    Returns the platform name (None when CUDASHIM_DISABLE=1). Raises the CudashimError that stopped
    it, having undone its earlier steps. Called after `import torch` it warns (visibility and the
    allocator settings may already be frozen) and installs what still helps: patches and the platform installer.
    """
    global _active, _off_reason
    if _disabled():
        _off_reason = "CUDASHIM_DISABLE is set"
        return None
    from ..platform import PLATFORMS

    if platform is not None and platform not in PLATFORMS:
        from ..errors import ConfigError

        raise ConfigError(f"cudashim.activate(platform={platform!r}): not a platform; use one of {', '.join(PLATFORMS)}")
    if _active is not None:
        if platform in (None, _active.platform):
            return _active.platform
        from ..errors import ConfigError

        raise ConfigError(
            f"cudashim.activate(platform={platform!r}): the shim is already active on {_active.platform}; "
            f"call cudashim.deactivate() first"
        )
    if "torch" in sys.modules:
        _warn(
            "activate() was called after `import torch`: device visibility and allocator settings set now "
            "may not take effect (torch/torch_npu read them at import); the platform's installer and patches "
            "are installed now. Start with `python -m cudashim run` to settle everything before torch loads.",
            stacklevel=2,
        )
    _active = _activate("activate", script_dir=_script_dir(),
                        config_path=os.fspath(config) if config is not None else None, platform=platform)
    return _active.platform


def deactivate() -> None:
    """Undo the activation (bootstrap or activate()): installer, patches, environment. Idempotent."""
    global _active, _off_reason
    active, _active = _active, None
    if active is None:
        return
    _off_reason = "cudashim.deactivate() was called"
    for fn in reversed(active.undo):
        fn()


def status() -> "dict[str, Any]":
    """What the shim did in this process: a dict, the same keys whether it is active or not.

    active          True when switched on (bootstrap or activate()) and not deactivated
    why_off         why it is not active (None when it is): disabled, a failed bootstrap, never switched on
    source          "bootstrap" (`cudashim run`, PYTHONPATH) or "activate" (in code)
    platform        "ascend" | "nvidia" | "cpu", and `platform_reason`: the override, config line or detection
    config          the config file that applies (None: none), and `config_reason`: how it was chosen
    hook            the import hook: "armed" (names known, nothing loaded: no torch or patch target
                    looked up yet), "loaded" (patches installed, the installer follows torch), "off"
    bootstrap_runs  0 or 1; chained_sitecustomize: the user's sitecustomize that ran after ours
    """
    a = _active
    return {
        "active": a is not None,
        "why_off": None if a else _off_reason,
        "source": a.source if a else None,
        "platform": a.platform if a else None,
        "platform_reason": a.reason if a else None,
        "reason": a.reason if a else None,  # the older name of platform_reason
        "config": str(a.config.path) if a and a.config.path else None,
        "config_reason": a.config_reason if a else None,
        "hook": a.hook.state if a else None,
        "bootstrap_runs": _bootstrap_runs,
        "chained_sitecustomize": _chained or None,
    }


def _reset() -> None:
    """cudashim._state.reset() calls this (named in its _START_UP: the bootstrap does not import the registry)."""
    global _bootstrap_runs, _chained, _off_reason
    deactivate()
    _bootstrap_runs = 0
    _chained = None
    _off_reason = _NEVER


