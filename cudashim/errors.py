"""The one error hierarchy. Every message names the thing, the platform and the fix.

Not imported in a shimmed start-up that goes well: the bootstrap's modules import it where they
raise or catch, and the package re-exports these classes lazily.
"""

__all__ = [
    "CudashimError",
    "CapabilityError",
    "ConfigError",
    "VisibilityError",
    "EnvError",
    "KernelUnavailableError",
    "HardwareError",
    "PatchError",
    "StandInAttributeError",
    "KernelArgumentError",
]


class CudashimError(Exception):
    """Base of every error the shim raises on purpose."""


class ConfigError(CudashimError, ValueError):
    """A config file or CUDASHIM_* value is malformed; the message names file, key and fix."""


class VisibilityError(CudashimError, ValueError):
    """CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES are malformed or contradict each other."""


class EnvError(CudashimError, ValueError):
    """An environment variable the shim reads holds a value it cannot use."""


class CapabilityError(CudashimError, RuntimeError):
    """The platform cannot do what the program asked for; raised early, never a silent wrong result."""


class KernelUnavailableError(CudashimError, AttributeError):
    """A kernel factory is missing from the active backend (AttributeError so hasattr() stays honest)."""


class HardwareError(CudashimError, LookupError):
    """A device fact (NUMA node, device index, accelerator kind) is unknown or asked for wrongly.

    Probes themselves never raise for absent hardware (they return None); this is for callers that
    need the answer, e.g. NUMA binding of a device nothing describes.
    """


class PatchError(CudashimError, ImportError):
    """A replacement could not be loaded, or a stand-in was asked for an original it does not have."""


class StandInAttributeError(CudashimError, AttributeError):
    """A stood-in module was asked for a symbol nobody patched."""


class KernelArgumentError(CudashimError, ValueError):
    """A kernel factory or kernel call got arguments it cannot serve; the message says which and why."""
