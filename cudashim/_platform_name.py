"""Which platform this process runs on: CUDASHIM_PLATFORM, else the config's `platform`, else detection.

resolve_platform_name lives in cudashim.config (the bootstrap imports that module anyway, and one
module fewer on its path is ~0.1 ms of every shimmed start-up); this name is kept for its importers.
"""

from __future__ import annotations

from .config import resolve_platform_name

__all__ = ["resolve_platform_name"]
