"""A small immutable record: what `@dataclass(frozen=True)` gives, without importing dataclasses.

The class itself lives in cudashim.envs (see the comment there): the bootstrap imports envs in every
shimmed interpreter, and a separate module for it cost one more import on that path. This name stays
for the modules that use records off the start-up path (hardware.nvidia) and for tests.
"""

from __future__ import annotations

from .envs import _Record as Record

__all__ = ["Record"]
