"""Device visibility, settled before torch (and with it torch_npu and the ACL runtime) loads.

The runtime freezes the visible device list when it initialises, so this must run in the bootstrap,
before `import torch` (which auto-loads torch_npu since torch 2.5). Pure: takes an environ, returns
the [(name, previous)] changes for undo and the messages worth a warning.

- ascend: CUDA_VISIBLE_DEVICES and ASCEND_RT_VISIBLE_DEVICES must agree, because code under the alias
  layer reads the CUDA one while CANN reads the Ascend one. One set -> copied to the other (with a
  warning); both set and different -> refused; not ascending -> refused (CANN hides devices otherwise).
- nvidia / ascend: CUDASHIM_DEVICES_PER_RANK=N with LOCAL_RANK narrows each rank to N consecutive devices.
- cpu: CUDA_VISIBLE_DEVICES follows CUDA's rules over the emulated devices (CUDASHIM_CPU_DEVICES,
  else LOCAL_WORLD_SIZE, else 1): '' or '-1' hides them all, a list keeps that many, and garbage or an
  index past the emulated devices is refused with the value named (CUDA would silently truncate).
"""

import os

# on every ascend start-up's path: no typing, no `from __future__ import annotations`, and the
# errors (and hardware.visible's parser) imported only where there is something to check
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import MutableMapping

    from .errors import VisibilityError

from . import envs
from .envs import Change

__all__ = ["CUDA", "ASCEND", "reconcile", "cpu_device_count"]

CUDA = "CUDA_VISIBLE_DEVICES"
ASCEND = "ASCEND_RT_VISIBLE_DEVICES"
# the variables each platform's runtime reads; per-rank assignment writes all of them
_WRITES = {"ascend": (ASCEND, CUDA), "nvidia": (CUDA,)}
_MARK = "CUDASHIM_RANK_DEVICES"


def _ids(name: str, env: "MutableMapping[str, str]") -> tuple[int, ...] | None:
    value = env.get(name)
    if value is None:  # unset: no list to parse (visible_device_ids(None) is None)
        return None
    from .hardware.visible import visible_device_ids

    return visible_device_ids(value, name)


def _error(message: str) -> "VisibilityError":
    from .errors import VisibilityError

    return VisibilityError(message)


def _reconcile_ascend(env: "MutableMapping[str, str]", notes: list[str]) -> list[tuple[str, str]]:
    cuda, ascend = _ids(CUDA, env), _ids(ASCEND, env)
    for name, ids in ((ASCEND, ascend), (CUDA, cuda)):
        if ids and list(ids) != sorted(ids):
            raise _error(
                f"{name}={env[name]!r} is not in ascending order; on ascend CANN then hides devices "
                f"silently: list them ascending, e.g. {','.join(map(str, sorted(ids)))!r}"
            )
    if cuda is not None and ascend is not None:
        if cuda != ascend:
            raise _error(
                f"CUDA_VISIBLE_DEVICES={env[CUDA]!r} and ASCEND_RT_VISIBLE_DEVICES={env[ASCEND]!r} differ; "
                f"on ascend both name the same NPUs: set them to the same list, or unset CUDA_VISIBLE_DEVICES"
            )
        return []
    if ascend is not None:
        notes.append(f"CUDA_VISIBLE_DEVICES copied from ASCEND_RT_VISIBLE_DEVICES={env[ASCEND]!r} so code reading either sees the same NPUs")
        return [(CUDA, env[ASCEND])]
    if cuda is not None:
        notes.append(f"ASCEND_RT_VISIBLE_DEVICES set from CUDA_VISIBLE_DEVICES={env[CUDA]!r}: on ascend it selects the NPUs")
        return [(ASCEND, env[CUDA])]
    return []


def _assign_rank(platform: str, env: "MutableMapping[str, str]") -> list[tuple[str, str]]:
    per_rank = envs.get("CUDASHIM_DEVICES_PER_RANK", env)
    rank = envs.get("LOCAL_RANK", env)
    if per_rank is None or rank is None or platform not in _WRITES:
        return []
    mark = f"{rank}:{per_rank}"
    if env.get(_MARK) == mark:
        return []  # a child of a rank already narrowed: its list is this rank's slice already
    if per_rank < 1:
        raise _error(f"CUDASHIM_DEVICES_PER_RANK={per_rank} gives a rank no device; use 1 or more, or unset it")
    from .hardware.visible import assign_visible_devices, format_visible_devices

    ids = assign_visible_devices(rank, per_rank, kind=platform, environ=env)
    value = format_visible_devices(ids)
    return [(name, value) for name in _WRITES[platform]] + [(_MARK, mark)]


def cpu_device_count(environ: "MutableMapping[str, str] | None" = None) -> int:
    """How many CUDA devices the cpu platform shows: the emulated ones less what CUDA_VISIBLE_DEVICES hides.

    Raises EnvError (CUDASHIM_CPU_DEVICES / LOCAL_WORLD_SIZE malformed or out of range) or
    VisibilityError (CUDA_VISIBLE_DEVICES malformed, or naming a device past the emulated ones).
    """
    env = os.environ if environ is None else environ
    n = envs.get("CUDASHIM_CPU_DEVICES", env)
    if n is None:
        n = envs.get("LOCAL_WORLD_SIZE", env)
        if n is not None and int(n) > envs.CPU_DEVICES_MAX:  # type: ignore[call-overload]
            from .errors import EnvError

            raise EnvError(
                f"LOCAL_WORLD_SIZE={n} ranks would each get an emulated CUDA device, more than the "
                f"{envs.CPU_DEVICES_MAX} the cpu platform emulates; set CUDASHIM_CPU_DEVICES to 0..{envs.CPU_DEVICES_MAX} "
                f"(ranks past it cannot set_device(local_rank)), or run fewer ranks per node"
            )
    emulated = 1 if n is None else int(n)  # type: ignore[call-overload]
    ids = _ids(CUDA, env)
    if ids is None:
        return emulated
    past = [i for i in ids if i >= emulated]
    if past:
        raise _error(
            f"{CUDA}={env[CUDA]!r} names device {past[0]}, but the cpu platform emulates {emulated} "
            f"(CUDASHIM_CPU_DEVICES={env.get('CUDASHIM_CPU_DEVICES', 'unset')}): list devices below {emulated}, "
            f"or raise CUDASHIM_CPU_DEVICES"
        )
    return len(ids)


def reconcile(platform: str, environ: "MutableMapping[str, str] | None" = None, *,
              notes: list[str] | None = None) -> list[Change]:
    """Settle the visible-device variables of `platform` in environ; return [(name, previous)].

    Raises VisibilityError (or EnvError for a malformed CUDASHIM_DEVICES_PER_RANK / LOCAL_RANK)
    before changing anything.
    """
    env = os.environ if environ is None else environ
    notes = [] if notes is None else notes
    # validated first on every platform: a typo here would otherwise surface only on the big machine
    envs.get("CUDASHIM_DEVICES_PER_RANK", env)
    envs.get("LOCAL_RANK", env)
    planned: list[tuple[str, str]] = []
    if platform == "cpu":
        cpu_device_count(env)  # checked now, before user code, not at `import torch`
    if platform == "ascend":
        planned += _reconcile_ascend(env, notes)
        scratch = dict(env)
        scratch.update(planned)
        planned += _assign_rank(platform, scratch)
    else:
        planned += _assign_rank(platform, env)
    changes: list[Change] = []
    for name, value in dict(planned).items():  # later steps win (rank slice over the copy)
        if env.get(name) != value:
            changes.append((name, env.get(name)))
            env[name] = value
    return changes
