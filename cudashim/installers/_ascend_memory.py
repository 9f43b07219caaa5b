"""torch.cuda.memory on ascend: the module's functions answered by torch_npu.npu.memory, and
``_set_allocator_settings("k:v,…")`` honoured or refused key by key (ALLOCATOR_KEYS, data).

transfer_to_npu aliases torch.cuda.X but patches only three names of torch.cuda.memory, so code that
calls ``torch.cuda.memory.mem_get_info()`` would otherwise reach CUDA's implementation.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any, Callable

from ..errors import CapabilityError
from ._common import Bindings

__all__ = ["ALLOCATOR_KEYS", "fill_memory", "make_set_allocator_settings", "parse_allocator_settings"]

# torch.cuda.memory._set_allocator_settings keys -> what happens on ascend
#   "runtime": forwarded to torch_npu.npu.memory._set_allocator_settings (the only key it accepts)
#   "startup": refused: the NPU allocator reads it from PYTORCH_NPU_ALLOC_CONF at start only
#   "degrade": performance-only, no NPU equivalent: dropped with one warning
#   anything else: refused, named
ALLOCATOR_KEYS: dict[str, str] = {
    "expandable_segments": "runtime",
    "max_split_size_mb": "startup",
    "garbage_collection_threshold": "startup",
    "roundup_power2_divisions": "degrade",
    "release_lock_on_cudamalloc": "degrade",
    "pinned_use_cuda_host_register": "degrade",
    "pinned_num_register_threads": "degrade",
    "pinned_use_background_threads": "degrade",
}

def parse_allocator_settings(settings: str) -> list[tuple[str, str]]:
    pairs = []
    for part in str(settings).split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition(":")
        if not sep:
            raise CapabilityError(
                f"torch.cuda.memory._set_allocator_settings({settings!r}): {part!r} is not key:value; "
                "write it as e.g. 'expandable_segments:True'")
        pairs.append((key.strip(), value.strip()))
    return pairs


def make_set_allocator_settings(npu_memory: Any) -> Callable[[str], None]:
    forward = getattr(npu_memory, "_set_allocator_settings", None)

    def _set_allocator_settings(settings: str) -> None:
        """torch.cuda.memory._set_allocator_settings on ascend: honoured or refused key by key."""
        honoured = []
        for key, value in parse_allocator_settings(settings):
            kind = ALLOCATOR_KEYS.get(key)
            if kind == "runtime" and forward is not None:
                honoured.append(f"{key}:{value}")
            elif kind == "startup":
                raise CapabilityError(
                    f"torch.cuda.memory._set_allocator_settings: {key!r} cannot change at run time on ascend "
                    f"(the NPU allocator reads it once at start); set {key}:{value} in PYTORCH_NPU_ALLOC_CONF "
                    "(or PYTORCH_CUDA_ALLOC_CONF, which cudashim copies there) before the program starts")
            elif kind == "degrade":
                warnings.warn(
                    f"torch.cuda.memory._set_allocator_settings: {key!r} has no NPU equivalent on ascend and is "
                    "ignored (performance only; results are unchanged)", RuntimeWarning, stacklevel=2)
            else:
                raise CapabilityError(
                    f"torch.cuda.memory._set_allocator_settings: {key!r} is not an allocator setting torch_npu "
                    f"understands on ascend; remove it from the call (at run time ascend takes only "
                    f"{', '.join(k for k, v in ALLOCATOR_KEYS.items() if v == 'runtime')})")
        if honoured:
            forward(",".join(honoured))

    return _set_allocator_settings


def fill_memory(bindings: Bindings, torch: Any, npu: Any) -> None:
    cuda_memory = getattr(torch.cuda, "memory", None)
    npu_memory = getattr(npu, "memory", None)
    if not isinstance(cuda_memory, ModuleType) or npu_memory is None:
        return
    # torch.cuda.X is aliased by transfer_to_npu, torch.cuda.memory.X is not (it patches three names):
    # every function both modules define goes to the NPU one
    for name, value in list(vars(cuda_memory).items()):
        if name.startswith("__") or name == "_set_allocator_settings" or not callable(value):
            continue
        if isinstance(value, type) or getattr(value, "__module__", None) != cuda_memory.__name__:
            continue  # classes and re-exports stay: only the module's own functions are CUDA calls
        target = getattr(npu_memory, name, None)
        if callable(target) and target is not value:
            bindings.bind(cuda_memory, name, target, api=f"torch.cuda.memory.{name}")
    bindings.bind(cuda_memory, "_set_allocator_settings", make_set_allocator_settings(npu_memory),
                   api="torch.cuda.memory._set_allocator_settings", treatment="emulated")
