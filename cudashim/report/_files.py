"""Where the migration report is written, and how: one file per process, never half a file, never
through a planted link, never over another process's report (the rules are the package docstring's).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

__all__ = ["rank", "pid_path", "ranked_path", "table", "ranks_wrote_since", "write_file"]


def rank() -> tuple[int | None, int | None]:
    def _int(name: str) -> int | None:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            return None

    rank, world = _int("RANK"), _int("WORLD_SIZE")
    dist = sys.modules.get("torch.distributed")
    if rank is None and dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
        except Exception:  # a torn-down group at exit: fall back to "no rank"
            pass
    return rank, world


def pid_path(p: Path) -> str:
    return str(p.with_name(f"{p.stem}.pid{os.getpid()}{p.suffix}"))


def ranked_path(base: str, owner: bool) -> str:
    """The file this process writes for `base`: suffixed per rank, or per process when it does not own the base name."""
    p = Path(base)
    r, world = rank()
    if r is not None and (world or 0) > 1:
        return str(p.with_name(f"{p.stem}.rank{r}{p.suffix}"))
    if not owner:
        return pid_path(p)
    return str(p)


def table(data: Mapping[str, Any], path: str, limit: int = 20) -> str:
    apis = data["apis"]
    summary = ", ".join(f"{n} {t}" for t, n in data["summary"].items() if n)
    where = (data["platform"] or "?") + (", SIMULATED NPU on the CPU" if data.get("simulated") else "")
    lines = [f"cudashim report ({where}): {len(apis)} CUDA APIs touched ({summary or 'none'}; "
             f"{data['bound']} in place) -> {path}"]
    for a in sorted(apis, key=lambda a: -a["calls"])[:limit]:
        lines.append(f"  {a['api']:<40} {a['treatment']:<11} {a['calls']:>8}  {a['first_call_site'] or ''}")
    if len(apis) > limit:
        lines.append(f"  ... {len(apis) - limit} more in the JSON file")
    patches = data["patches"]
    if patches:
        states: dict[str, int] = {}
        for p in patches:
            states[str(p.get("state"))] = states.get(str(p.get("state")), 0) + 1
        lines.append("  patches: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    return "\n".join(lines)


def ranks_wrote_since(base: str, started: float) -> bool:
    p = Path(base)
    try:
        return any(f.stat().st_mtime >= started - 1.0 for f in p.parent.glob(f"{p.stem}.rank*{p.suffix}"))
    except OSError:
        return False


def write_file(target: str, data: Mapping[str, Any], claim: bool, started: float) -> str:
    """Write data to target through a private temporary; returns the file written.

    With `claim` (the base name of an owner), a file at target written during this run is another
    process's report: it is kept and this one goes to the .pid<PID> name instead.
    """
    import tempfile

    folder = os.path.dirname(target) or "."
    os.makedirs(folder, exist_ok=True)
    # mkstemp: O_CREAT|O_EXCL, mode 0600, a random name: a planted link is never followed
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, default=str)  # a patch status may carry paths or objects
            f.write("\n")
        if claim:
            try:
                os.link(tmp, target)  # atomic, and fails when the name exists
                os.unlink(tmp)
                return target
            except FileExistsError:
                if os.lstat(target).st_mtime >= started:  # written during this run: not ours to replace
                    target = pid_path(Path(target))
            except OSError:  # a file system without hard links: rename below
                pass
        os.replace(tmp, target)  # a reader never sees half a file
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target
