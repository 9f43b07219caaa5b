"""The runtime record of one active patch (Patch), PatchError and MISSING.

They live in cudashim.patches itself (the bootstrap imports it in every shimmed interpreter, and one
module fewer on that path is ~0.1 ms of each start-up); this name is kept for their importers (_apply).
"""

from __future__ import annotations

from . import MISSING, Patch, PatchError

__all__ = ["Patch", "PatchError", "MISSING"]
