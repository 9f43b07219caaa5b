"""`cudashim run [--platform P] [--simulate] [--config FILE] [--report FILE] [--profile NAME] (script.py | - | -m module | -c code | EXECUTABLE) args...`

The launcher changes nothing in the program: it puts the bootstrap folder first on PYTHONPATH, sets
CUDASHIM_STRICT=1 (and the variables its options stand for) and replaces itself with the program
through exec. sys.argv, __main__, exit codes, signals and stdin are therefore exactly python's, and
every child Python process (multiprocessing spawn, torchrun workers, subprocess) inherits the
environment and is shimmed too. The bootstrap in the new process does the real work, before the
first user line runs.

One exception: when a sitecustomize/usercustomize of the user's already ran in this interpreter
(Python runs it at start-up, before any cudashim code), exec would run it a second time in the same
pid. Then the program runs as a child process instead (its own pid; exit status, signals forwarded),
so each interpreter runs it once.

`--simulate` (with --platform ascend, implied when no platform is given) sets CUDASHIM_SIMULATE=1: the
program runs on the simulated Ascend NPU on the CPU (cudashim/emulated/npu, README "Testing an Ascend
port without an NPU").

`--profile NAME` sets CUDASHIM_PROFILE: the emulated (or simulated) device presents that GPU or NPU,
its memory included (cudashim/emulated/profiles, docs/profiles-and-memory.md); an unknown name stops here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

from ..platform import PLATFORMS

__all__ = ["BOOTSTRAP_DIR", "USAGE", "main", "python_path", "build_command"]

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_bootstrap")
USAGE = (
    "usage: python -m cudashim run [--platform ascend|nvidia|cpu] [--simulate] [--config FILE] [--report FILE]\n"
    "                              [--profile NAME]\n"
    "                              (script.py | - | -m module | -c code | EXECUTABLE) [args...]"
)


class _UsageError(Exception):
    pass


def python_path(current: str | None, first: str = BOOTSTRAP_DIR) -> str:
    """`first` at the front of a PYTHONPATH value, once; the user's entries kept in their order."""
    norm = os.path.normcase(os.path.abspath(first))
    rest = [p for p in (current or "").split(os.pathsep)
            if p and os.path.normcase(os.path.abspath(p)) != norm]
    return os.pathsep.join([first, *rest])


def _interpreter_options() -> list[str]:
    """Options given to the interpreter that runs us (`python -X dev -u -m cudashim run ...`), so the
    program runs under the same ones; none when started through the console script."""
    argv = list(getattr(sys, "orig_argv", []))
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-X", "-W", "--check-hash-based-pycs"):
            i += 2  # these take a separate value
            continue
        if arg == "-m" or (arg.startswith("-m") and len(arg) > 2):
            module = argv[i + 1] if arg == "-m" and i + 1 < len(argv) else arg[2:]
            return argv[1:i] if module in ("cudashim", "cudashim.cli") else []
        if not arg.startswith("-") or arg == "-c" or arg.startswith("-c"):
            return []  # a script or -c code: we were not started as `-m cudashim`
        i += 1
    return []


def _parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-h", "--help"):
            raise _UsageError("")
        if arg == "--simulate":  # the simulated Ascend NPU: a flag, no value
            opts["simulate"] = "1"
            i += 1
            continue
        name, eq, value = arg.partition("=")
        if name in ("--platform", "--config", "--report", "--profile"):
            if not eq:
                if i + 1 >= len(argv):
                    raise _UsageError(f"{name} needs a value")
                value = argv[i + 1]
                i += 1
            opts[name[2:]] = value
            i += 1
            continue
        if arg.startswith("--") or (arg.startswith("-") and arg not in ("-m", "-c") and len(arg) > 1):
            raise _UsageError(f"unknown option {arg!r}")
        break
    rest = argv[i:]
    if not rest:
        raise _UsageError("nothing to run: give a script, -m module, -c code or an executable")
    return opts, rest


def _executable(name: str) -> str | None:
    """`name` beside the running interpreter first (the console scripts of the venv it belongs to,
    which need not be on PATH when the venv is used by its full path), then on PATH."""
    if os.sep not in name and (os.altsep is None or os.altsep not in name):
        beside = shutil.which(name, path=os.path.dirname(sys.executable))
        if beside is not None:
            return beside
    return shutil.which(name)


def build_command(rest: list[str]) -> tuple[str, list[str], str]:
    """(file to exec, its argv, folder the config search starts from) for what follows the options."""
    py = sys.executable
    pre = [py, *_interpreter_options()]
    head = rest[0]
    if head in ("-m", "-c"):
        if len(rest) < 2:
            raise _UsageError(f"{head} needs an argument")
        return py, [*pre, *rest], os.getcwd()
    if head == "-":  # the program on stdin, as `python -`
        return py, [*pre, *rest], os.getcwd()
    if head.endswith((".py", ".pyw")) or os.path.isdir(head):
        if not os.path.exists(head):
            raise FileNotFoundError(head)
        return py, [*pre, *rest], os.path.dirname(os.path.abspath(head))
    exe = _executable(head)
    if exe is not None:
        return exe, rest, os.getcwd()  # argv[0] stays as the user typed it
    if os.path.isfile(head):  # a Python script without the .py suffix, as `python name` would run it
        return py, [*pre, *rest], os.path.dirname(os.path.abspath(head))
    raise FileNotFoundError(head)


def _user_customize_ran() -> bool:
    """A sitecustomize/usercustomize other than cudashim's trampoline ran in this interpreter."""
    return any(m is not None and not getattr(m, "__cudashim_trampoline__", False)
               for m in (sys.modules.get("sitecustomize"), sys.modules.get("usercustomize")))


_FORWARDED = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def _run_as_child(file: str, argv: list[str]) -> int:
    """Run the program in a child process and end as it ended: its exit code, or its fatal signal.
    SIGINT reaches the child from the terminal (same process group) and is ignored here; the other
    termination signals sent to this pid are passed on."""
    try:
        child = subprocess.Popen(argv, executable=file)
    except OSError as e:
        print(f"cudashim run: cannot start {argv[0]!r}: {e.strerror}", file=sys.stderr)
        return 126 if e.errno in (13, 8) else 127
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in _FORWARDED:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda sig, _frame: child.send_signal(sig))
    code = child.wait()
    if code < 0:  # killed by a signal: die of the same one, so the caller sees the same wait status
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        opts, rest = _parse(args)
        platform = opts.get("platform")
        if platform is not None and platform.strip().lower() not in PLATFORMS:
            raise _UsageError(f"--platform {platform!r} is not a platform; use one of {', '.join(PLATFORMS)}")
        if opts.get("simulate"):
            if platform is not None and platform.strip().lower() != "ascend":
                raise _UsageError(f"--simulate simulates the Ascend NPU only; use --platform ascend, not {platform!r}")
            platform = "ascend"
        config = opts.get("config")
        if config is not None and not os.path.isfile(config):
            raise _UsageError(f"--config {config!r}: no such file; give the path of a cudashim.toml or pyproject.toml")
        profile = opts.get("profile")
        if profile is not None:
            from ..emulated import profiles

            try:
                profiles.load(profile)
            except profiles.ProfileError as e:
                raise _UsageError(f"--profile: {e}") from None
        file, child_argv, script_dir = build_command(rest)
    except _UsageError as e:
        if str(e):
            print(f"cudashim run: {e}", file=sys.stderr)
        print(USAGE, file=sys.stderr if str(e) else sys.stdout)
        return 2 if str(e) else 0
    except FileNotFoundError as e:
        # the message python itself prints for a missing script, same exit code
        name = str(e)
        also = "" if name.endswith((".py", ".pyw")) else f" (nor is {name!r} an executable beside {sys.executable!r} or on PATH)"
        print(f"cudashim run: can't open file {os.path.abspath(name)!r}: [Errno 2] No such file or directory{also}",
              file=sys.stderr)
        return 2
    env = os.environ
    env["PYTHONPATH"] = python_path(env.get("PYTHONPATH"))
    env["CUDASHIM_STRICT"] = "1"
    env["CUDASHIM_SCRIPT_DIR"] = script_dir
    if platform is not None:
        env["CUDASHIM_PLATFORM"] = platform.strip().lower()
    if opts.get("simulate"):
        env["CUDASHIM_SIMULATE"] = "1"
    if config is not None:
        env["CUDASHIM_CONFIG"] = os.path.abspath(config)
    if profile is not None:
        env["CUDASHIM_PROFILE"] = profile
    if opts.get("report") is not None:
        env["CUDASHIM_REPORT"] = os.path.abspath(opts["report"])
    sys.stdout.flush()
    sys.stderr.flush()
    if _user_customize_ran():
        return _run_as_child(file, child_argv)
    try:
        os.execv(file, child_argv)
    except OSError as e:
        print(f"cudashim run: cannot start {child_argv[0]!r}: {e.strerror}", file=sys.stderr)
        return 126 if e.errno in (13, 8) else 127
    return 0  # not reached
