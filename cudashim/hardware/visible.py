"""Visible-device variables: which one a platform reads, how its value parses, how ranks split devices.

Pure functions of their arguments (plus detection when no kind is given): writing the variables
into the environment, and reconciling CUDA_ with ASCEND_RT_, is the activation layer's job.
"""

import os

from . import KINDS, accelerator_kind, device_count

# imported by the bootstrap when visible-device variables are set: no typing, no `from __future__
# import annotations`, and the error classes only when one is raised (each is one more import)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Mapping, Sequence

    from ..errors import VisibilityError

__all__ = [
    "ENV_NAMES",
    "visible_device_env_name",
    "visible_device_ids",
    "format_visible_devices",
    "assign_visible_devices",
]

# On cpu the program under the shim still reads CUDA_VISIBLE_DEVICES (torch.cuda is aliased there)
ENV_NAMES: dict[str, str] = {
    "ascend": "ASCEND_RT_VISIBLE_DEVICES",
    "nvidia": "CUDA_VISIBLE_DEVICES",
    "cpu": "CUDA_VISIBLE_DEVICES",
}

_NONE = ("", "-1")


def _error(message: str) -> "VisibilityError":
    from ..errors import VisibilityError

    return VisibilityError(message)


def visible_device_env_name(kind: str | None = None, root: str | None = None) -> str:
    """The variable the runtime of `kind` (default: the detected accelerator) reads."""
    kind = accelerator_kind(root) if kind is None else kind
    try:
        return ENV_NAMES[kind]
    except KeyError:
        from ..errors import HardwareError

        raise HardwareError(f"unknown accelerator kind {kind!r}; use one of {', '.join(KINDS)}") from None


def visible_device_ids(value: str | None, name: str = "CUDA_VISIBLE_DEVICES") -> tuple[int, ...] | None:
    """'0, 2,3' -> (0, 2, 3) in the given order; '' and '-1' -> () (no device); None (unset) -> None.

    Anything else is a VisibilityError naming the variable and its value: non-integer entries
    (GPU UUIDs included), negative ids, empty entries and duplicates. The runtimes silently truncate
    such lists, which is how a rank ends up on someone else's device.
    """
    if value is None:
        return None
    if value.strip() in _NONE:
        return ()
    ids: list[int] = []
    for position, item in enumerate(value.split(",")):
        entry = item.strip()
        if not entry:
            raise _error(
                f"{name}={value!r} has an empty entry at position {position}; "
                f"write comma-separated device indices such as '0,1' ('' or '-1' for none)"
            )
        if entry.startswith("-") and entry[1:].isascii() and entry[1:].isdigit():
            raise _error(
                f"{name}={value!r} contains the negative id {entry}; "
                f"device indices are >= 0 (use '' or '-1' alone to hide every device)"
            )
        if not (entry.isascii() and entry.isdigit()):
            raise _error(
                f"{name}={value!r} contains {entry!r}, which is not a device index; cudashim accepts "
                f"integer indices only (not UUIDs or names): use e.g. '0,1'"
            )
        n = int(entry)
        if n in ids:
            raise _error(f"{name}={value!r} lists device {n} twice; list each device once")
        ids.append(n)
    return tuple(ids)


def format_visible_devices(ids: "Sequence[int]") -> str:
    """The value to write for ids: '0,1'; '' hides every device."""
    return ",".join(str(i) for i in ids)


def assign_visible_devices(
    local_rank: int,
    per_rank: int,
    available: "Sequence[int] | None" = None,
    *,
    kind: str | None = None,
    root: str | None = None,
    environ: "Mapping[str, str] | None" = None,
) -> tuple[int, ...]:
    """The `per_rank` consecutive devices of rank `local_rank`, taken from `available`.

    `available` defaults to the devices the visible-device variable of `kind` already allows, else
    every device of the tree. Raises VisibilityError when the rank's slice runs past them.
    """
    if isinstance(local_rank, bool) or not isinstance(local_rank, int) or local_rank < 0:
        raise _error(f"LOCAL_RANK={local_rank!r} is not a rank; use an integer >= 0")
    if isinstance(per_rank, bool) or not isinstance(per_rank, int) or per_rank < 1:
        raise _error(
            f"CUDASHIM_DEVICES_PER_RANK={per_rank!r} is not a device count; use an integer >= 1"
        )
    kind = accelerator_kind(root) if kind is None else kind
    name = visible_device_env_name(kind)
    if available is None:
        env = os.environ if environ is None else environ
        parsed = visible_device_ids(env.get(name), name)
        available = parsed if parsed is not None else tuple(range(device_count(kind, root)))
    start, stop = local_rank * per_rank, (local_rank + 1) * per_rank
    if stop > len(available):
        shown = format_visible_devices(available) or "none"
        raise _error(
            f"LOCAL_RANK={local_rank} with {per_rank} device(s) per rank needs devices #{start}..#{stop - 1} "
            f"but only {len(available)} are available on {kind} ({name}: {shown}); "
            f"lower CUDASHIM_DEVICES_PER_RANK or start fewer ranks per node"
        )
    return tuple(available[start:stop])
