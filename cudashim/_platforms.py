"""The platform names: the one list that detection, `CUDASHIM_PLATFORM`, the config, the patch packs'
modes and the capability table all read. On the start-up path of every shimmed process, so it
imports nothing at run time (not even `typing`).
"""

__all__ = ["PLATFORMS", "Platform"]

#: every platform, in the order detection checks them
PLATFORMS: tuple[str, ...] = ("ascend", "nvidia", "cpu")

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers (tests keep the two equal)
    from typing import Literal

    Platform = Literal["ascend", "nvidia", "cpu"]
else:
    Platform = str
