"""`python -m cudashim doctor [--json] [--torch]`: what the shim sees and would do here.

The platform and why it was chosen, the devices with their NUMA nodes, the visible-device variables,
the environment the bootstrap would set, the capability table for the platform, and the optional
packages installed. Nothing here imports torch (or creates a device context) unless --torch asks for it:
package versions come from importlib.metadata, devices from cudashim.hardware, the environment and
visibility from dry runs of the bootstrap's own functions on a copy of the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import metadata
from typing import Any, Callable, Mapping

from .. import envs
from ..errors import CudashimError
from ..platform import capabilities

__all__ = ["OPTIONAL_PACKAGES", "collect", "render_text", "main"]

# distributions reported (metadata only: importing them would import torch)
OPTIONAL_PACKAGES = ("torch", "torch_npu", "tilelang", "nvidia-ml-py", "transformers", "triton", "flash_attn")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _attempt(problems: list[str], what: str, fn: Callable[[], Any], default: Any = None) -> Any:
    """Run one probe; a failure becomes a line under `problems` instead of stopping the report."""
    try:
        return fn()
    except (CudashimError, OSError, ValueError) as e:
        problems.append(f"{what}: {e}")
        return default


def _platform_section(env: Mapping[str, str], problems: list[str]) -> tuple[str, dict[str, Any]]:
    from ..config import explain_config, load_config
    from ..platform import resolve_platform_name
    from ..platform.contract import PLATFORM_CLASSES

    config = _attempt(problems, "config", lambda: load_config(environ=env))
    config_why = _attempt(problems, "config", lambda: explain_config(environ=env)[1], "")
    resolved = _attempt(problems, "platform", lambda: resolve_platform_name(config, env))
    if resolved is None:
        # still report something useful: what the hardware alone says
        from ..hardware import accelerator_kind

        root = env.get("CUDASHIM_SYSROOT") or None
        resolved = (accelerator_kind(root), "fell back to hardware detection because of a problem listed below")
    name, reason = resolved
    cls = PLATFORM_CLASSES[name]
    section = {
        "name": name,
        "reason": reason,
        "class": cls.__name__,
        "tilelang_ops_backend": cls.tilelang_ops_backend,
        "distributed_backend": cls.distributed_backend,
        "fp8_sf_type": f"torch.{cls._sf_dtype}",
        "sf_pack_factor": cls._sf_itemsize,
        "config": {
            "path": str(config.path) if config is not None and config.path else None,
            "why": config_why,
            "platform": getattr(config, "platform", None),
            "patches": len(getattr(config, "patches", ()) or ()),
        },
    }
    return name, section


def _devices_section(env: Mapping[str, str], platform: str) -> dict[str, Any]:
    from .. import hardware
    from ..platform.peak import bf16_tflops_for, first_device_name

    simulated = hardware.simulated_root(env)
    root = env.get("CUDASHIM_SYSROOT") or simulated
    detected = hardware.accelerator_kind(root)
    out: dict[str, Any] = {"detected": detected, "root": root or "/", "devices": [],
                           "simulated": simulated is not None and root == simulated}
    if detected == "nvidia":
        out["devices"] = [
            {"index": g.index, "name": g.name, "compute_capability": list(g.compute_capability)
             if g.compute_capability else None, "bus_id": g.bus_id, "numa_node": g.numa_node}
            for g in hardware.discover_gpus(root)
        ]
    elif detected == "ascend":
        out["devices"] = [
            {"index": i, "entry": d.entry, "physical_id": d.physical_id, "numa_node": d.numa_node}
            for i, d in enumerate(hardware.discover_npu_devices(root))
        ]
    nodes = hardware.numa_cpus(root) or {}
    from ..hardware.cpu import format_cpu_list

    out["numa_nodes"] = {str(n): format_cpu_list(cpus) for n, cpus in sorted(nodes.items())}
    if detected != "cpu":
        device_name = out["devices"][0].get("name") if out["devices"] and detected == "nvidia" else None
        out["bf16_tflops_limit"] = bf16_tflops_for(device_name or first_device_name(detected, root))
    else:
        out["bf16_tflops_limit"] = None
    return out


def _visibility_section(env: Mapping[str, str], platform: str, problems: list[str]) -> dict[str, Any]:
    from ..hardware.visible import ENV_NAMES, visible_device_ids

    out: dict[str, Any] = {"reads": ENV_NAMES.get(platform), "variables": {}}
    for name in sorted(set(ENV_NAMES.values())):
        value = env.get(name)
        parsed = _attempt(problems, name, lambda: visible_device_ids(value, name))
        out["variables"][name] = {"value": value, "ids": list(parsed) if parsed is not None else None}
    reconcile = getattr(_optional("cudashim.visibility"), "reconcile", None)
    if callable(reconcile):
        copy, notes = dict(env), []
        changes = _attempt(problems, "visible devices", lambda: reconcile(platform, copy, notes=notes), [])
        out["would_set"] = {n: copy.get(n) for n, _ in changes or ()}
        out["notes"] = notes
    return out


def _environment_section(env: Mapping[str, str], platform: str, problems: list[str]) -> dict[str, Any]:
    """The per-platform table from cudashim.envs and what applying it to this environment would change."""
    rules = [r for r in getattr(envs, "PLATFORM_ENV", ()) if getattr(r, "platform", None) == platform]
    out: dict[str, Any] = {"rules": [], "would_set": {}, "notes": []}
    for r in rules:
        out["rules"].append({"name": r.name, "value": r.value, "mode": r.mode, "why": r.why,
                             "source": getattr(r, "source", None), "when": getattr(r, "when", None),
                             "current": env.get(r.name)})
    apply = getattr(envs, "apply_platform_env", None)
    if callable(apply):
        copy, notes = dict(env), []
        changes = _attempt(problems, "environment", lambda: apply(platform, copy, notes=notes), [])
        out["would_set"] = {n: copy.get(n) for n, _ in changes or ()}
        out["notes"] = notes
    return out


def _capabilities_section(platform: str) -> dict[str, Any]:
    out = {}
    for cap in capabilities.TABLE:
        cell = cap.cells[platform]
        out[cap.id] = {"status": cell.status, "failure": cell.failure, "level": cell.level,
                       "note": cell.note, "way_out": cell.way_out or None, "limit": cell.limit,
                       "limit_kind": cap.limit_kind if cell.limit is not None else None}
    return out


def _torch_section() -> dict[str, Any]:
    import torch  # only with --torch

    out: dict[str, Any] = {"version": torch.__version__, "cuda_build": torch.version.cuda,
                           "cuda_available": bool(torch.cuda.is_available())}
    out["device_count"] = int(torch.cuda.device_count()) if out["cuda_available"] else 0
    npu = getattr(torch, "npu", None)
    out["npu_available"] = bool(npu.is_available()) if npu is not None and hasattr(npu, "is_available") else None
    from .. import _torch_compat

    out["decisions"] = _torch_compat.decisions(torch)  # where this torch differs, and what the shim does about it
    return out


def _optional(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def collect(with_torch: bool = False, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The whole report as one JSON-ready dict; `problems` lists what looks wrong (never raises for it)."""
    env = dict(os.environ if environ is None else environ)
    problems: list[str] = []
    name, plat = _platform_section(env, problems)
    plat["simulated"] = bool(_attempt(problems, "CUDASHIM_SIMULATE", lambda: envs.get("CUDASHIM_SIMULATE", env)))
    if plat["simulated"] and name != "ascend":
        problems.append(f"CUDASHIM_SIMULATE=1 simulates the Ascend NPU only; the platform is {name}: set "
                        "CUDASHIM_PLATFORM=ascend or unset CUDASHIM_SIMULATE")
        plat["simulated"] = False
    report: dict[str, Any] = {"platform": plat}
    report["hardware"] = _attempt(problems, "hardware", lambda: _devices_section(env, name), {
        "detected": None, "root": env.get("CUDASHIM_SYSROOT") or "/", "devices": [], "numa_nodes": {},
        "bf16_tflops_limit": None})
    report["visible_devices"] = _visibility_section(env, name, problems)
    report["environment"] = _environment_section(env, name, problems)
    report["capabilities"] = _capabilities_section(name)
    report["packages"] = {"cudashim": _version("cudashim"), **{d: _version(d) for d in OPTIONAL_PACKAGES}}
    report["torch"] = _torch_section() if with_torch else None
    # what the shim did in doctor's own process (`cudashim run ... doctor`, PYTHONPATH): cudashim.status()
    from .._bootstrap import status

    report["this_process"] = status()
    report["problems"] = problems
    return report


def render_text(report: Mapping[str, Any]) -> str:
    p, hw = report["platform"], report["hardware"]
    sim = " SIMULATED (CUDASHIM_SIMULATE=1: CPU implementations, no NPU)" if p.get("simulated") else ""
    lines = [f"platform: {p['name']} ({p['class']}){sim}", f"  why: {p['reason']}",
             f"  kernels: {p['tilelang_ops_backend']}   collectives: {p['distributed_backend']}   "
             f"UE8M0 scales: {p['fp8_sf_type']} x{p['sf_pack_factor']}"]
    cfg = p["config"]
    lines.append(f"  config: {cfg['path'] or 'none found'}" + (f" ({cfg['patches']} patch entries)" if cfg["path"] else ""))
    if cfg.get("why"):
        lines.append(f"    why: {cfg['why']}")
    lines += ["", f"hardware under {hw['root']}: {hw['detected']}, {len(hw['devices'])} device(s)"
              + (" of the simulated Ascend host (not a real NPU)" if hw.get("simulated") else "")]
    for d in hw["devices"]:
        what = d.get("name") or d.get("entry")
        cc = f" cc {d['compute_capability'][0]}.{d['compute_capability'][1]}" if d.get("compute_capability") else ""
        lines.append(f"  [{d['index']}] {what}{cc}  NUMA node {d['numa_node'] if d['numa_node'] is not None else '?'}")
    if hw["numa_nodes"]:
        lines.append("  NUMA nodes: " + "; ".join(f"{n}: cpus {c}" for n, c in hw["numa_nodes"].items()))
    if hw.get("bf16_tflops_limit"):
        lines.append(f"  BF16 dense peak: {hw['bf16_tflops_limit']:g} TFLOPS per device")
    vis = report["visible_devices"]
    lines += ["", f"visible devices (the runtime reads {vis['reads']}):"]
    for n, v in vis["variables"].items():
        lines.append(f"  {n}={v['value'] if v['value'] is not None else '(unset)'}")
    for n, v in (vis.get("would_set") or {}).items():
        lines.append(f"  would set {n}={v}")
    env = report["environment"]
    lines += ["", "environment the shim sets on this platform:"]
    if not env["rules"]:
        lines.append("  (nothing)")
    for r in env["rules"]:
        shown = r["value"] if r["value"] is not None else f"from {r['source']}"
        state = f"would set {env['would_set'][r['name']]!r}" if r["name"] in env["would_set"] else (
            f"kept {r['current']!r}" if r["current"] is not None else "not needed")
        lines.append(f"  {r['name']}={shown} [{r['mode']}] -> {state}  # {r['why']}")
    for note in env.get("notes", []) + vis.get("notes", []):
        lines.append(f"  note: {note}")
    lines += ["", f"capabilities on {p['name']}:"]
    for cid, c in report["capabilities"].items():
        extra = "" if c["limit"] is None else (
            f" [aligned to {c['limit']} B]" if c["limit_kind"] == "align" else f" [at most {c['limit']}]")
        lines.append(f"  {cid:<28} {c['status']:<12}{c['level']}  {c['note']}{extra}")
    lines += ["", "packages:"]
    lines += [f"  {d:<14} {v or '-'}" for d, v in report["packages"].items()]
    t = report.get("torch")
    if t:
        lines += ["", f"torch {t['version']}: cuda build {t['cuda_build']}, cuda available {t['cuda_available']}, "
                      f"{t['device_count']} device(s), npu available {t['npu_available']}"]
    st = report.get("this_process")
    if st is not None:
        lines += ["", "the shim in this process (cudashim.status()):"]
        if st["active"]:
            lines.append(f"  active ({st['source']}) on {st['platform']}; import hook {st['hook']}")
            lines.append(f"  config: {st['config'] or 'none'} ({st['config_reason']})")
        else:
            lines.append(f"  off: {st['why_off']}")
    if report["problems"]:
        lines += ["", "problems:"] + [f"  - {m}" for m in report["problems"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cudashim doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--torch", action="store_true", help="also import torch and report what it sees")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    report = collect(with_torch=args.torch)
    print(json.dumps(report, indent=2, sort_keys=False) if args.json else render_text(report))
    return 1 if report["problems"] else 0
