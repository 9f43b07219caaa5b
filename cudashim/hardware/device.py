"""The one I/O seam of hardware discovery: every file read and every external command goes through here.

Root resolution: an explicit ``root`` argument, else env ``CUDASHIM_SYSROOT``, else ``/``. Every path a
probe reads (``/dev``, ``/sys``, ``/proc``) is joined under that root, so tests point it at a fake tree.

External commands (``npu-smi``, ``lscpu``) are injectable the same way: under a root other than ``/``
the executable is looked up ONLY under that root (``<root>/usr/local/sbin``, ``<root>/usr/local/bin``,
``<root>/usr/sbin``, ``<root>/usr/bin``, ``<root>/sbin``, ``<root>/bin``), never on the host's PATH, so
a fake tree decides which tools exist and what they print (a tree without them means "absent"). Under
``/`` the host's PATH is searched, plus the places vendor tools install to outside it.

Probes return ``None`` for "absent": a missing file, an unreadable one, garbage in it, a missing
binary, a non-zero exit or a timeout all read the same. Nothing here raises for bad hardware data.
"""

import os

# The root and listing helpers are the package's own (cudashim.hardware): detection needs them in
# every shimmed start-up, and this module would be one more import there. They are this seam's
# all the same, and are re-exported here.
from ._fs import join, list_dir, numbered, resolve_root

# typing and `from __future__ import annotations` (each one more import) stay off the start-up path
# (detection runs in every shimmed process): annotations naming typing's names are strings
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Sequence

__all__ = [
    "resolve_root",
    "is_real_root",
    "join",
    "exists",
    "list_dir",
    "read_text",
    "read_int",
    "numbered",
    "find_executable",
    "run_command",
]

# sysfs attributes are one short line; the cap keeps a hostile or huge file from costing anything
_READ_LIMIT = 1 << 20

# where tools live under a fake root (and, for /, beyond PATH: npu-smi often sits in /usr/local/sbin,
# which a non-login shell's PATH may lack)
_FAKE_ROOT_BIN_DIRS = ("usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin")
_EXTRA_HOST_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/local/Ascend/driver/tools")


def is_real_root(root: str) -> bool:
    """True when root is this machine's own '/', i.e. live hardware rather than a fake tree."""
    return os.path.realpath(root) == "/"


def exists(path: str) -> bool:
    # lexists: a dangling /dev symlink still says a driver created the node
    return os.path.lexists(path)


def read_text(path: str) -> str | None:
    """The file's text, or None when absent, unreadable, a directory, or not valid UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read(_READ_LIMIT)
    except (OSError, ValueError):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_int(path: str) -> int | None:
    """A file holding one integer (sysfs style, trailing newline), or None for absent/garbage."""
    text = read_text(path)
    if text is None:
        return None
    text = text.strip()
    # int() alone would accept '1_000' and '+3'; sysfs never writes those, so they are garbage here
    if not text or not (text.isdigit() or (text[0] == "-" and text[1:].isdigit())) or not text.isascii():
        return None
    return int(text)


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_executable(name: str, root: str | None = None) -> str | None:
    """Where `name` would be run from for this root (see the module docstring), or None."""
    root = resolve_root(root)
    if is_real_root(root):
        import shutil

        found = shutil.which(name)
        if found:
            return found
        candidates = [os.path.join(d, name) for d in _EXTRA_HOST_BIN_DIRS]
    else:
        candidates = [os.path.join(root, d, name) for d in _FAKE_ROOT_BIN_DIRS]
    for candidate in candidates:
        if _is_executable(candidate):
            return candidate
    return None


def run_command(argv: "Sequence[str]", timeout: float, root: str | None = None) -> str | None:
    """stdout of argv[0] (resolved by find_executable) with the rest as arguments, or None.

    None when the binary is missing, cannot be started, exits non-zero, or outlives `timeout`
    seconds; in the last case its whole process group is killed, so a hung tool (or a shell script
    whose child hangs while holding our pipe) can never stall the caller past the timeout.
    """
    exe = find_executable(argv[0], root)
    if exe is None:
        return None
    import signal
    import subprocess

    # C locale: tool output is parsed, and a translated 'CPU Affinity' header would not match
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        proc = subprocess.Popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    except (OSError, ValueError):
        return None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()
        return None
    if proc.returncode != 0:
        return None
    return out.decode("utf-8", "replace")
