"""`python -m cudashim.emulated [KEY] [-v]`: build (or find) the native core, the one library both
devices load, and load it for KEY (CUDA, or PrivateUse1); print the loaded file's path."""

import sys

import torch  # noqa: F401  (the core links against the loaded torch)

from ._build import load

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "-v"]
    mod = load(args[0] if args else "CUDA", verbose="-v" in sys.argv)
    print(mod.__file__)
