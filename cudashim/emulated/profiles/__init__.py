"""Device profiles: the GPU (or NPU) an emulated device presents, one TOML file each in this folder.

`cudashim run --profile NAME` (or CUDASHIM_PROFILE=NAME) makes every emulated device that part: its
name, compute capability, multiprocessor count and the other properties PyTorch exposes, and its
memory -- `total_memory`, `mem_get_info()`, the capacity past which an allocation raises CUDA's
out-of-memory error. NAME is a file name here without `.toml` (`h100-80gb`), or the path of a
TOML file of the same form, so a user adds a part without touching the package.

A file holds `device` ("cuda" for the emulated CUDA device, "npu" for the simulated Ascend NPU),
`name`, `total_memory` (bytes) and, for cuda, `major`, `minor`, `multi_processor_count`; any other key
must be a property of torch's device properties (PROPERTY_KEYS) and is presented as it is.
Reading needs no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from ...errors import CudashimError

__all__ = ["Profile", "ProfileError", "PROPERTY_KEYS", "names", "load", "active"]

_DIR = os.path.dirname(os.path.abspath(__file__))

# torch.cuda.get_device_properties()'s fields (and torch_npu's for npu) a profile may set
PROPERTY_KEYS: dict[str, frozenset[str]] = {
    "cuda": frozenset({
        "major", "minor", "multi_processor_count", "max_threads_per_multi_processor", "warp_size", "L2_cache_size",
        "regs_per_multiprocessor", "shared_memory_per_block", "shared_memory_per_block_optin",
        "shared_memory_per_multiprocessor", "max_threads_per_block", "clock_rate", "memory_clock_rate",
        "memory_bus_width", "is_integrated", "is_multi_gpu_board", "gcnArchName",
    }),
    "npu": frozenset({"cube_core_num", "vector_core_num", "L2_cache_size"}),
}
_REQUIRED = {"cuda": ("major", "minor", "multi_processor_count"), "npu": ()}


class ProfileError(CudashimError, ValueError):
    """A profile name that names no profile, or a profile file that is not well formed."""


@dataclass(frozen=True)
class Profile:
    key: str            # the file name without .toml, or the path given
    device: str         # "cuda" | "npu"
    name: str
    total_memory: int
    properties: Mapping[str, Any] = field(default_factory=dict)  # the other keys, as given
    path: str = ""

    def get(self, key: str, default: Any = None) -> Any:
        return self.properties.get(key, default)


def names() -> list[str]:
    """The profiles shipped with cudashim."""
    return sorted(f[:-5] for f in os.listdir(_DIR) if f.endswith(".toml"))


def _read_toml(path: str) -> dict[str, Any]:
    try:
        import tomllib as _toml
    except ModuleNotFoundError:  # pragma: no cover - 3.10
        import tomli as _toml  # type: ignore[no-redef]
    with open(path, "rb") as f:
        return _toml.load(f)


def _check(doc: dict[str, Any], path: str) -> None:
    def bad(what: str) -> ProfileError:
        return ProfileError(f"device profile {path}: {what}")

    device = doc.get("device")
    if device not in PROPERTY_KEYS:
        raise bad(f"`device` is {device!r}; set device = \"cuda\" (an NVIDIA GPU) or \"npu\" (an Ascend NPU)")
    if not isinstance(doc.get("name"), str) or not doc["name"]:
        raise bad("`name` is missing; set name = \"<the device name PyTorch reports>\"")
    mem = doc.get("total_memory")
    if not isinstance(mem, int) or isinstance(mem, bool) or mem <= 0:
        raise bad(f"`total_memory` is {mem!r}; set it to the device's memory in bytes (a positive integer)")
    for key in _REQUIRED[device]:
        if key not in doc:
            raise bad(f"`{key}` is missing; a {device} profile sets {', '.join(_REQUIRED[device])}")
    allowed = PROPERTY_KEYS[device] | {"device", "name", "total_memory"}
    for key, value in doc.items():
        if key not in allowed:
            raise bad(f"`{key}` is not a property cudashim presents for {device}; use one of {', '.join(sorted(allowed))}")
        if key not in ("device", "name", "gcnArchName") and (not isinstance(value, int) or isinstance(value, bool)):
            raise bad(f"`{key}` is {value!r}; it must be an integer")


def load(name: str) -> Profile:
    """The profile `name` (a shipped name, or the path of a .toml file)."""
    given = name.strip()
    if given.endswith(".toml") or os.sep in given:
        path = os.path.abspath(given)
        if not os.path.isfile(path):
            raise ProfileError(f"device profile {given!r}: no such file; give the path of a profile .toml "
                               f"or one of the shipped names: {', '.join(names())}")
        key = path
    else:
        key = given.lower()
        path = os.path.join(_DIR, f"{key}.toml")
        if not key or not os.path.isfile(path):
            raise ProfileError(f"device profile {given!r} is not one cudashim ships; use one of: {', '.join(names())} "
                               "(or the path of a .toml file of your own, see docs/profiles-and-memory.md)")
    try:
        doc = _read_toml(path)
    except (OSError, ValueError) as e:
        raise ProfileError(f"device profile {path}: cannot be read as TOML ({e}); fix the file") from None
    _check(doc, path)
    rest = {k: v for k, v in doc.items() if k not in ("device", "name", "total_memory")}
    return Profile(key=key, device=doc["device"], name=doc["name"], total_memory=doc["total_memory"],
                   properties=rest, path=path)


def active(device: str, environ: "Mapping[str, str] | None" = None) -> Profile | None:
    """The profile CUDASHIM_PROFILE names for devices of type `device` ("cuda" or "npu"), or None
    when unset. A profile of the other device type is refused, naming the ones that fit."""
    raw = (os.environ if environ is None else environ).get("CUDASHIM_PROFILE", "").strip()
    if not raw:
        return None
    prof = load(raw)
    if prof.device != device:
        fits = [n for n in names() if load(n).device == device]
        what = "the emulated cuda device" if device == "cuda" else "the simulated Ascend NPU"
        raise ProfileError(f"CUDASHIM_PROFILE={raw!r} is a {prof.device} profile ({prof.name}); {what} takes one "
                           f"of: {', '.join(fits)}")
    return prof
