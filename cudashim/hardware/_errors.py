"""The error hardware discovery raises when a fact the caller needs cannot be known."""

from __future__ import annotations

from ..errors import CudashimError

__all__ = ["HardwareError"]


class HardwareError(CudashimError, LookupError):
    """A device fact (NUMA node, device index, accelerator kind) is unknown or asked for wrongly.

    Probes themselves never raise for absent hardware (they return None); this is for callers that
    need the answer, e.g. NUMA binding of a device nothing describes.
    """
