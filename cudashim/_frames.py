"""Which stack frames are the program's: the one rule the migration report and the memory preflight
share when they name a call site. A frame under the shim's own folder, torch's or torch_npu's is never
the user's; one under an installed library's folder is the user's only when no user frame is above it."""

import os
import sys

__all__ = ["SHIM_DIR", "LIBRARY_DIRS", "framework_dirs"]

#: the shim's own folder (cudashim/)
SHIM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
LIBRARY_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def framework_dirs() -> tuple:
    """The shim's folder, then torch's and torch_npu's where they are imported (looked up per call: a
    torch imported later is still skipped)."""
    dirs = [SHIM_DIR]
    for name in ("torch", "torch_npu"):
        f = getattr(sys.modules.get(name), "__file__", None)
        if f:
            dirs.append(os.path.dirname(os.path.abspath(f)) + os.sep)
    return tuple(dirs)
