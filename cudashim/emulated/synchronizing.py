"""The operators CUDA synchronizes on, as the emulated device enforces them under
`torch.cuda.set_sync_debug_mode`: the table in synchronizing.json (measured on a GPU by
verification/sync_debug_cuda.py), read and checked here, registered by the native core."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import CudashimError

__all__ = ["TABLE", "table", "register_operators"]

TABLE = Path(__file__).with_name("synchronizing.json")


def table(path: Path = TABLE) -> list[tuple[str, str]]:
    """(operator, when) pairs: `aten::name[.overload]`, and `always`, `none:ARG`, `bool:ARG`, `device:ARG` or
    `put:ARG` (an index_put, ARG its indices: by its arguments, as CUDA's index_put decides)."""
    try:
        ops = json.loads(path.read_text())["ops"]
    except (OSError, ValueError, KeyError) as e:
        raise CudashimError(f"the synchronizing-operator table {path} does not read ({e}); restore it from the "
                            "repository or regenerate it with verification/sync_debug_cuda.py") from e
    out = []
    for name, when in ops.items():
        kind, _, arg = str(when).partition(":")
        if not name.startswith("aten::") or kind not in ("always", "none", "bool", "device", "put") or (kind == "always") == bool(arg):
            raise CudashimError(f"{path}: entry {name!r}: {when!r} is not one of always, none:ARG, bool:ARG, device:ARG, "
                                "put:ARG (ARG an argument of the operator's schema)")
        out.append((name, str(when)))
    return out


def register_operators(core: object) -> None:
    """The core's operators for its dispatch key, the table's synchronizing ones among them: once per
    process, when a device is installed and before any operator runs on it."""
    core.register_operators(table())  # type: ignore[attr-defined]
