"""Every environment variable the shim reads or sets, typed, in one place.

READ lists the variables the shim reads (its own CUDASHIM_* and the foreign ones it interprets).
The per-platform table of variables the bootstrap sets lives here too (PLATFORM_ENV, filled by the
activation layer) so that `cudashim doctor` can print it.
Reading never imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

from .errors import EnvError

__all__ = ["Var", "READ", "get", "raw"]


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("", "0", "false", "no", "off"):
        return False
    raise EnvError(f"{name}={value!r} is not a boolean; use 1 or 0")


def _int(name: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise EnvError(f"{name}={value!r} is not an integer; set it to a whole number or unset it") from None
    if n < 0:
        raise EnvError(f"{name}={value!r} is negative; set it to a number >= 0 or unset it")
    return n


def _str(name: str, value: str) -> str:
    return value.strip()


def _csv(name: str, value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


def _platform(name: str, value: str) -> str:
    v = value.strip().lower()
    if v not in ("ascend", "nvidia", "cpu"):
        raise EnvError(f"{name}={value!r} is not a platform; use ascend, nvidia or cpu (or unset it to detect)")
    return v


@dataclass(frozen=True)
class Var:
    name: str
    parse: Callable[[str, str], object]
    default: object
    doc: str


READ: dict[str, Var] = {
    v.name: v
    for v in (
        Var("CUDASHIM_DISABLE", _bool, False, "1 turns the whole shim off (trampolines become no-ops)"),
        Var("CUDASHIM_PLATFORM", _platform, None, "override detection: ascend | nvidia | cpu"),
        Var("CUDASHIM_CONFIG", _str, None, "path of the config file to use instead of searching"),
        Var("CUDASHIM_REPORT", _str, None, "write the migration report (JSON) to this path at exit"),
        Var("CUDASHIM_DISABLE_PATCHES", _csv, (), "patch keys or built-in pack names to switch off"),
        Var("CUDASHIM_DEVICES_PER_RANK", _int, None, "with LOCAL_RANK: give each rank N consecutive devices"),
        Var("CUDASHIM_CPU_DEVICES", _int, None, "torch.cuda.device_count() on cpu (default LOCAL_WORLD_SIZE or 1)"),
        Var("CUDASHIM_NCCL_NUM_SMS", _int, 32, "NCCL min/max CTAs in get_distributed_options()"),
        Var("CUDASHIM_STRICT", _bool, False, "set by `cudashim run`: bootstrap errors stop the process (exit 2)"),
        Var("CUDASHIM_SYSROOT", _str, None, "root under which hardware probes read /dev, /sys, /proc (tests)"),
        Var("CUDASHIM_DEBUG", _bool, False, "trace what the shim does on stderr"),
        Var("CUDA_VISIBLE_DEVICES", _str, None, "CUDA's visible devices"),
        Var("ASCEND_RT_VISIBLE_DEVICES", _str, None, "CANN's visible devices"),
        Var("LOCAL_RANK", _int, None, "rank on this node, set by launchers (torchrun)"),
        Var("LOCAL_WORLD_SIZE", _int, None, "ranks on this node, set by launchers (torchrun)"),
    )
}


def raw(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The unparsed value, or None when unset."""
    return (os.environ if environ is None else environ).get(name)


def get(name: str, environ: Mapping[str, str] | None = None) -> object:
    """The typed value of a variable in READ; its default when unset; EnvError when malformed."""
    var = READ[name]
    value = raw(name, environ)
    if value is None:
        return var.default
    return var.parse(name, value)
