"""Stand-in modules for CUDA-only packages that are not installed.

A stand-in has a real ModuleSpec (so importlib.util.find_spec answers and transformers' probes keep
working), exposes only the patched symbols (installed by _apply as lazy attributes), and answers any
other attribute with an AttributeError naming the symbol, the platform and the config line to add.
It has no distribution metadata: importlib.metadata.version("flash_attn") still raises
PackageNotFoundError, so probes that require a version (transformers' is_flash_attn_2_available)
report the package as unavailable instead of trusting a version that does not exist.
"""

from __future__ import annotations

import sys

from ..errors import StandInAttributeError

TYPE_CHECKING = False  # imported by the bootstrap (patches.install): no typing, types or importlib
if TYPE_CHECKING:  # pragma: no cover
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

_ModuleType = type(sys)  # types.ModuleType, without importing types

__all__ = ["StandInModule", "StandInLoader", "StandInAttributeError", "make_spec", "is_standin"]

ORIGIN = "cudashim stand-in"


class StandInModule(_ModuleType):
    """Module type of every stand-in; the class attributes are set per module by the loader."""

    __cudashim_platform__ = "?"
    __cudashim_config_hint__ = "pyproject.toml"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):  # copy/inspect/pickle probes: stay quiet
            raise AttributeError(f"stand-in module {self.__name__!r} has no attribute {name!r}")
        d = self.__dict__
        platform = d.get("__cudashim_platform__", "?")
        hint = d.get("__cudashim_config_hint__", "pyproject.toml")
        exposed = sorted(d.get("__cudashim_exposed__", ()))
        have = f"only {', '.join(exposed)}" if exposed else "nothing but its submodules"
        raise StandInAttributeError(
            f"{self.__name__}.{name} is CUDA-only: {self.__name__!r} is not installed and cudashim "
            f"(platform {platform}) stands it in with {have}; to provide it, add under "
            f"[tool.cudashim.patches.{platform}] in {hint}: "
            f'"{self.__name__}:{name}" = "your.module:{name}"'
        )

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.__dict__.get("__cudashim_exposed__", ())))


class StandInLoader:
    """Creates the (empty) stand-in; the patch layer fills in its symbols from the load callback."""

    def __init__(self, platform: str, config_hint: str) -> None:
        self.platform = platform
        self.config_hint = config_hint

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = StandInModule(spec.name)
        module.__dict__["__cudashim_platform__"] = self.platform
        module.__dict__["__cudashim_config_hint__"] = self.config_hint
        module.__dict__["__cudashim_exposed__"] = set()
        return module

    def exec_module(self, module: ModuleType) -> None:
        pass  # nothing to run; the finder's load callback installs the patched symbols


def make_spec(name: str, is_package: bool, platform: str, config_hint: str) -> ModuleSpec:
    from importlib.machinery import ModuleSpec

    spec = ModuleSpec(name, StandInLoader(platform, config_hint), origin=ORIGIN, is_package=is_package)
    if is_package:
        spec.submodule_search_locations = []  # children come from our finder only
    return spec


def is_standin(module: Any) -> bool:
    return isinstance(module, StandInModule)
