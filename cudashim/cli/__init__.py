"""`cudashim` / `python -m cudashim`: run | doctor | patches.

Each subcommand lives in its own module and is imported only when asked for, so `cudashim run`
starts the user's program without importing anything it does not need.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["main"]

# subcommand -> (module, function taking argv list and returning an exit code, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("cudashim.cli.run", "main", "run a script, -m module or executable under the shim"),
    "doctor": ("cudashim.cli.doctor", "main", "show the platform, devices, environment and capabilities"),
    "patches": ("cudashim.cli.patches", "main", "list the patches active for this platform"),
}


def _usage() -> str:
    lines = ["usage: python -m cudashim COMMAND [args...]", "", "commands:"]
    lines += [f"  {name:<9} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"cudashim: unknown command {name!r}; use one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    try:
        return int(getattr(importlib.import_module(module), func)(rest) or 0)
    except BrokenPipeError:  # `cudashim doctor | head`: the reader left, which is not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
