"""What torch.compile sees of the cpu alias layer: compiled code must trace the aliased APIs as
Dynamo traces them on CUDA, with no graph break and no recompilation.

Dynamo snapshots torch's tensor methods (trace_rules.get_tensor_method(): every C method of
torch.Tensor) the first time it compiles, which is after the alias layer replaced Tensor.to,
.cuda, .pin_memory, .new_* ... with Python wrappers. Left alone, Dynamo then knows neither: it
inlines the wrapper, meets the captured C original, calls it an unknown builtin and breaks the graph
(and under a TorchFunctionMode such as torch.set_default_device's it cannot even build the wrapper's
closure). So both the wrappers and the originals are declared tensor methods: Dynamo records
`x.to("cuda")` as the method call it is, and the device is rewritten when the graph runs (the eager
backend calls the bound method) or is lowered (AOTAutograd traces through the bound method), so
Inductor only ever sees CPU tensors. The eager path is untouched: nothing here runs per call.

The torch factories (torch.zeros, torch.empty_like ...) are wrapped too. Dynamo's rule table is
built from names (load "torch.zeros", whatever is bound there) the first time it compiles, then
cached: built under the layer, it declares the wrapper the in-graph function its name says (the
wrapper runs when the graph runs or is lowered); built before, it holds torch's function, which
Dynamo meets after inlining the wrapper. Either traces. Uninstall drops the cached tables, so
plain torch compiles its own functions again (a table built under the layer knows only wrappers).

Dynamo answers a few tensor attributes from the traced tensor's device without calling Python;
those answer as eager code under the shim does (`is_cuda` True, `get_device()` the current index).
Inductor's CUDA probe sees the truth, so CPU graphs never go to Triton.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from ._common import Bindings, when_imported

__all__ = ["bind", "forget"]

_TABLES = ("get_tensor_method", "get_torch_obj_rule_map")  # Dynamo's cached tables of torch objects

# Library probes that must see the truth (DESIGN section 5): module -> (class, attribute) whose
# answer is torch's real torch.cuda.is_available. Inductor asks CudaInterface whether Triton has a
# GPU to compile for; saying yes on a CPU would send CPU graphs to Triton's CUDA driver.
_TRUTH_PROBES: dict[str, tuple[tuple[str, str], ...]] = {
    "torch._dynamo.device_interface": (("CudaInterface", "is_available"),),
}


def bind(b: Bindings, torch: Any, tensor_methods: tuple[str, ...], current_device: Callable[[], int],
         real_is_available: Callable[[], bool], is_active: Callable[[], bool]) -> None:
    """Register the compile-time bindings into b (each applies when its torch module loads).

    tensor_methods: the torch.Tensor attributes the layer replaced with Python wrappers, each
    keeping the method's own name; current_device: the CUDA index `get_device()` answers.
    """
    for mod_name, attrs in _TRUTH_PROBES.items():
        def probe(mod: Any, _attrs: tuple[tuple[str, str], ...] = attrs) -> None:
            for cls_name, attr in _attrs:
                cls = getattr(mod, cls_name, None)
                if is_active() and cls is not None:
                    b.bind(cls, attr, staticmethod(real_is_available))

        when_imported(mod_name, probe)

    def rules(mod: Any) -> None:
        if not is_active():
            return
        orig = getattr(mod, "get_tensor_method", None)
        if orig is not None:
            b.bind(mod, "get_tensor_method", _with_tensor_methods(orig, torch, tensor_methods))

    def tensor_variable(mod: Any) -> None:
        cls = getattr(mod, "TensorVariable", None)
        build = getattr(getattr(mod, "VariableTracker", None), "build", None)
        if is_active() and cls is not None and build is not None:
            _bind_tensor_answers(b, cls, build, current_device)

    when_imported("torch._dynamo.trace_rules", rules)
    when_imported("torch._dynamo.variables.tensor", tensor_variable)


def forget() -> None:
    """Drop Dynamo's cached tables of torch objects (on uninstall: they hold what was bound when
    they were built)."""
    mod = sys.modules.get("torch._dynamo.trace_rules")
    for name in _TABLES:
        clear = getattr(getattr(mod, name, None), "cache_clear", None)
        if clear is not None:
            clear()


def _with_tensor_methods(orig: Callable[[], frozenset[Any]], torch: Any,
                         names: tuple[str, ...]) -> Callable[[], frozenset[Any]]:
    # Dynamo reaches a tensor method through the class attribute (our wrapper) or, when it built
    # its tables before the layer was installed, the C original; both mean "this tensor method".
    # Dynamo records the call by name, so each wrapper carries the method's __name__.
    cache: list[frozenset[Any]] = []

    def get_tensor_method() -> frozenset[Any]:
        if not cache:
            base = torch._C.TensorBase
            extra = {getattr(torch.Tensor, n) for n in names if hasattr(torch.Tensor, n)}
            extra |= {vars(base)[n] for n in names if n in vars(base)}
            cache.append(orig() | frozenset(extra))
        return cache[0]

    def cache_clear() -> None:  # torch's own clear_lru_cache() calls this
        cache.clear()
        getattr(orig, "cache_clear", lambda: None)()

    get_tensor_method.cache_clear = cache_clear  # type: ignore[attr-defined]
    get_tensor_method.__wrapped__ = orig  # type: ignore[attr-defined]
    return get_tensor_method


def _bind_tensor_answers(b: Bindings, cls: Any, build: Callable[..., Any], current_device: Callable[[], int]) -> None:
    orig_is_cuda = getattr(cls, "method_attr_is_cuda", None)
    orig_get_device = getattr(cls, "method_get_device", None)

    def _on_cpu(var: Any) -> bool:
        device = getattr(var, "device", None)
        return device is not None and getattr(device, "type", None) == "cpu"

    if orig_is_cuda is not None:
        def method_attr_is_cuda(self: Any, tx: Any) -> Any:
            return build(tx, True) if _on_cpu(self) else orig_is_cuda(self, tx)

        b.bind(cls, "method_attr_is_cuda", method_attr_is_cuda)
    if orig_get_device is not None:
        # the index at trace time: a process sets its device once, before it compiles
        def method_get_device(self: Any, tx: Any) -> Any:
            return build(tx, current_device()) if _on_cpu(self) else orig_get_device(self, tx)

        b.bind(cls, "method_get_device", method_get_device)
