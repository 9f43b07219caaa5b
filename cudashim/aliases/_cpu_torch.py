"""torch-wide aliases for the cpu target: checkpoints, default device, generators, autocast, GradScaler.

torch.load sends CUDA locations to the CPU (a GPU checkpoint loads without map_location);
torch.set_default_device("cuda") / `with torch.device("cuda")` both build a DeviceContext, patched
in place; torch.Generator(device="cuda") is a CPU generator through a stand-in class that keeps
isinstance() true for every real generator. Autocast: device_type "cuda" is "cpu", an explicit dtype
is honoured, no dtype means CPU autocast's default (bfloat16); custom_fwd/custom_bwd(device_type=
"cuda") are CPU ones (they compare `t.device.type`, which is "cpu" here). GradScaler("cuda") is a
CPU GradScaler.
"""

from __future__ import annotations

from typing import Any

from ._common import Bindings, DeviceRewriter, map_location_for, wrap_args

__all__ = ["bind", "alias_class"]


def bind(b: Bindings, torch: Any, rw: DeviceRewriter) -> None:
    """Bind the torch-wide aliases into b."""
    import torch.serialization as ser
    import torch.utils._device as udev

    orig_load = ser.load

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        return orig_load(f, map_location_for(map_location, rw, ser.default_restore_location), *args, **kwargs)

    load.__wrapped__ = orig_load  # type: ignore[attr-defined]
    b.bind(torch, "load", load, "torch.load(map_location)", "aliased")
    b.bind(ser, "load", load)

    # torch.set_default_device and `with torch.device("cuda")` both construct a DeviceContext
    b.bind(udev.DeviceContext, "__init__", wrap_args(udev.DeviceContext.__init__, {"device": (1, rw)}),
           "torch.set_default_device", "aliased")

    gen = torch.Generator
    b.bind(torch, "Generator", alias_class(gen, lambda device="cpu", *a, **k: gen(rw(device), *a, **k)),
           "torch.Generator(device='cuda')", "aliased")

    # autocast / GradScaler: patched in place so torch.cuda.amp's subclasses and isinstance() hold
    ac = torch.amp.autocast_mode.autocast
    b.bind(ac, "__init__", wrap_args(ac.__init__, {"device_type": (1, rw)}), "torch.autocast('cuda')", "aliased")
    cuda_ac = torch.cuda.amp.autocast

    def cuda_ac_init(self: Any, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        ac.__init__(self, "cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    b.bind(cuda_ac, "__init__", cuda_ac_init, "torch.cuda.amp.autocast", "aliased")
    for fname in ("is_autocast_enabled", "get_autocast_dtype"):
        orig = getattr(torch, fname)

        def query(*args: Any, _orig: Any = orig) -> Any:
            if not args or args[0] == "cuda":
                return _orig("cpu")
            return _orig(*args)

        b.bind(torch, fname, query, f"torch.{fname}", "aliased")
    # custom_fwd/bwd compare `t.device.type == device_type` (a CUDA tensor's type is "cpu" here)
    amp_mode = torch.amp.autocast_mode
    for fname in ("custom_fwd", "custom_bwd"):
        deco = wrap_args(getattr(amp_mode, fname), {"device_type": (None, rw)})
        b.bind(amp_mode, fname, deco, f"torch.amp.{fname}(device_type='cuda')", "aliased")
        if getattr(torch.amp, fname, None) is not None:
            b.bind(torch.amp, fname, deco)
    gs = torch.amp.grad_scaler.GradScaler
    orig_gs = gs.__init__

    def gs_init(self: Any, device: Any = "cuda", *args: Any, **kwargs: Any) -> None:
        orig_gs(self, rw(device), *args, **kwargs)

    b.bind(gs, "__init__", gs_init, "torch.amp.GradScaler('cuda')", "aliased")


def alias_class(cls: type, make: Any) -> type:
    """A stand-in for cls whose construction goes through make() and that answers isinstance /
    issubclass for cls; instances are real cls instances, so C++ type checks are unaffected."""
    meta = type(cls)

    def __call__(self: type, *args: Any, **kwargs: Any) -> Any:
        return make(*args, **kwargs) if self is alias else meta.__call__(self, *args, **kwargs)

    def __instancecheck__(self: type, inst: Any) -> bool:
        return isinstance(inst, cls)

    def __subclasscheck__(self: type, sub: type) -> bool:
        return issubclass(sub, cls)

    alias_meta = meta("_Alias" + meta.__name__, (meta,), {"__call__": __call__, "__instancecheck__": __instancecheck__,
                                                          "__subclasscheck__": __subclasscheck__})
    alias = alias_meta(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return alias
