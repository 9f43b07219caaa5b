"""The file-system primitives every probe reads through (device.py's seam) and the /dev rules.

Here, not in the package's __init__, so that the vendor modules (ascend, nvidia) and device.py,
which the package loads lazily, import this module and never the package itself (no cycle).
"""

import os

from .. import envs

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Iterable, Sequence

__all__ = ["resolve_root", "join", "list_dir", "numbered", "ascend_node_listed", "nvidia_node_listed"]


def resolve_root(root: str | os.PathLike[str] | None = None) -> str:
    """The absolute root every probe reads under: the argument, else $CUDASHIM_SYSROOT, else '/'."""
    if root is None:
        root = envs.get("CUDASHIM_SYSROOT") or "/"
    return os.path.abspath(os.fspath(root))


def join(root: str, path: str) -> str:
    """The absolute `path` (e.g. '/sys/class/ubcore') seen under `root`."""
    return os.path.join(root, path.lstrip("/"))


def list_dir(path: str, sort: bool = True) -> "Sequence[str]":
    """Entry names, sorted unless told not to (detection only asks whether one matches: a host's /dev
    holds hundreds); () when the directory is absent or unreadable."""
    try:
        names = os.listdir(path)
    except OSError:
        return ()
    return tuple(sorted(names)) if sort else names


def numbered(name: str, prefix: str) -> int | None:
    """N of a name `prefix` + N ('davinci3', 'nvidia0', 'udma12'), else None.

    Exactly what re.match(rf"^{prefix}(\\d+)$", name) accepts (Unicode decimal digits; `$` also
    matches before one trailing newline), without importing re on the start-up path.
    """
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix):]
    if digits.endswith("\n"):
        digits = digits[:-1]
    return int(digits) if digits.isdecimal() else None


# The /dev rules of ascend.is_available and nvidia.is_available, defined here (and used there) so that
# detection decides from the /dev listing alone when it is certain, without importing a vendor module
# (a machine with an accelerator is the machine users run on). Only the other sources of each verdict,
# Ascend's ubcore entries and NVIDIA's procfs bus ids, need the vendor module's parsing.
def ascend_node_listed(dev_names: "Iterable[str]") -> bool:
    """/dev/davinci_manager or a /dev/davinciN."""
    return any(n == "davinci_manager" or numbered(n, "davinci") is not None
               for n in dev_names if n.startswith("davinci"))


def nvidia_node_listed(dev_names: "Iterable[str]") -> bool:
    """A /dev/nvidiaN (nvidiactl, nvidia-uvm... are not GPUs)."""
    return any(numbered(n, "nvidia") is not None for n in dev_names if n.startswith("nvidia"))
