"""All mutable process state of the shim lives here, so tests can put it back with reset().

Modules that keep state register a reset callback with on_reset(); reset() runs them newest first.
The registry itself is defined in the package (cudashim/__init__.py), which every shimmed interpreter
imports first anyway: modules on the bootstrap path register there directly, one import fewer.
"""

from __future__ import annotations

from . import _on_reset as on_reset, _reset as reset

__all__ = ["on_reset", "reset"]
