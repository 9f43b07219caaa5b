"""The capability table's Ascend rows, enforced where an engine asks for them (ENFORCED, data).

Each row wraps one library function when its module loads (through the import hook): a refused
capability raises CapabilityError naming the API, a degraded one warns once, both before the call.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable

from .. import report
from ..platform import capabilities
from . import probes
from ._common import Bindings

__all__ = ["ENFORCED", "enforce_capabilities"]

PLATFORM = "ascend"

# where an engine asks for something the Ascend column of the capability table refuses or degrades:
# (module, attribute, capability id, when) — "call": every call; "truthy": only when the first argument
# (or enabled=/mode=) is truthy, so switching the feature *off* stays a plain call.
ENFORCED: tuple[tuple[str, str, str, str], ...] = (
    ("torch.distributed._symmetric_memory", "empty", "symmetric_memory", "call"),
    ("torch.distributed._symmetric_memory", "rendezvous", "symmetric_memory", "call"),
    ("torch.distributed._symmetric_memory", "enable_symm_mem_for_group", "symmetric_memory", "call"),
    ("torch.distributed._symmetric_memory", "get_symm_mem_workspace", "symmetric_memory", "call"),
    ("deep_gemm", "set_pdl", "pdl", "truthy"),
    ("tile_kernels", "set_pdl", "pdl", "truthy"),
    ("batch_invariant_ops", "set_batch_invariant_mode", "batch_invariant", "truthy"),
    ("batch_invariant_ops", "enable_batch_invariant_mode", "batch_invariant", "call"),
    ("vllm.model_executor.layers.batch_invariant", "enable_batch_invariant_mode", "batch_invariant", "call"),
    ("sglang.srt.batch_invariant_ops.batch_invariant_ops", "enable_batch_invariant_mode", "batch_invariant", "call"),
)


def _truthy_request(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if args:
        return bool(args[0])
    for key in ("enabled", "enable", "mode", "value"):
        if key in kwargs:
            return bool(kwargs[key])
    return True  # a bare call of a setter means "on"


def _enforcing(fn: Callable[..., Any], api: str, cap: str, when: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def enforced(*args: Any, **kwargs: Any) -> Any:
        if when == "call" or _truthy_request(args, kwargs):
            report.record(api, "emulated" if capabilities.supported(cap, PLATFORM) else "unsupported")
            capabilities.require(cap, PLATFORM, api=api)
        return fn(*args, **kwargs)

    enforced.__cudashim_enforced__ = cap  # type: ignore[attr-defined]
    return enforced


def _enforce(bindings: Bindings, active: Callable[[], bool], module_name: str, attr: str, cap: str, when: str,
             module: ModuleType) -> None:
    if not active():  # the layer was uninstalled before this module loaded
        return
    fn = getattr(module, attr, None)
    if not callable(fn) or getattr(fn, "__cudashim_enforced__", None) is not None:
        return
    if capabilities.entry(cap, PLATFORM).status == "native":
        return
    bindings.bind(module, attr, _enforcing(fn, f"{module_name}.{attr}", cap, when))


def enforce_capabilities(bindings: Bindings, active: Callable[[], bool]) -> None:
    """Wrap every ENFORCED function whose capability is not native on ascend, now or when it loads."""
    for module_name, attr, cap, when in ENFORCED:
        probes.when_imported(module_name, functools.partial(_enforce, bindings, active, module_name, attr, cap, when))
