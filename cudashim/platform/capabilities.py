"""THE capability table: capability x platform -> native / emulated / unsupported, how it fails, how far verified.

The table is data (TABLE below); `require()` turns it into early, loud failures, and `render_markdown()` into
the README copy (`python scripts/generate.py --write` refreshes it with every other generated text; a test fails when it is stale).

Verification levels (docs/design.md §6): L0 written against the documented API; L1 contract-tested against
the real upstream code; L1s ran end to end on the simulated target (`cudashim run --platform ascend --simulate`:
the torch-npu wheel's Python over simulated natives, NPU operators implemented on the CPU from their docs; no NPU);
L2 compiled for the target; L3 ran on the hardware (CPU rows: in CI).
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import _state
from ..errors import CapabilityError
from . import PLATFORMS as _PLATFORM_NAMES

__all__ = [
    "PLATFORMS",
    "STATUSES",
    "FAILURES",
    "LEVELS",
    "Entry",
    "Capability",
    "TABLE",
    "ids",
    "get",
    "entry",
    "supported",
    "require",
    "limit",
    "check_limit",
    "render_markdown",
    "update_readme",
    "main",
]

# the README's column order (the pass-through platform first); the names are cudashim.platform's
PLATFORMS = ("nvidia", "ascend", "cpu")
assert sorted(PLATFORMS) == sorted(_PLATFORM_NAMES), "the capability table needs a column per platform"
STATUSES = ("native", "emulated", "unsupported")
RAISE_CONSTRUCTION, RAISE_CALL, WARN = "raise at construction", "raise at call", "warn and degrade"
FAILURES = (RAISE_CONSTRUCTION, RAISE_CALL, WARN)
LEVELS = ("L0", "L1", "L1s", "L2", "L3")
_MiB = 1024 * 1024


@dataclass(frozen=True)
class Entry:
    """One cell: what `platform` does for one capability."""

    status: str  # native | emulated | unsupported
    failure: str | None  # how it fails when asked for beyond what it can do (None: it cannot fail)
    level: str  # one of LEVELS, see the module docstring
    note: str
    way_out: str = ""  # what the user does instead (required for unsupported and warn-mode cells)
    limit: int | None = None  # numeric bound where the capability is a number (None: no bound)


@dataclass(frozen=True)
class Capability:
    id: str
    title: str
    api: str  # what the user's code calls, named in errors when the caller gives no api
    cells: Mapping[str, Entry]
    limit_kind: str = "max"  # how Entry.limit bounds a value: "max" (value <= limit) or "align" (value % limit == 0)


def _cap(cap_id: str, title: str, api: str, limit_kind: str = "max", **cells: Entry) -> Capability:
    """One row; its cells keyed by platform name (every name of cudashim.platform.PLATFORMS, no other)."""
    if set(cells) != set(_PLATFORM_NAMES):
        raise ValueError(f"capability {cap_id!r}: cells for {sorted(cells)}; give one for each of {', '.join(_PLATFORM_NAMES)}")
    return Capability(cap_id, title, api, cells, limit_kind)


N, E, U = "native", "emulated", "unsupported"
_EAGER = "run with enforce_eager=True (or your engine's eager switch) so no graph is captured"
_PATCH = 'map the symbol to a portable replacement in [tool.cudashim.patches] ("module:symbol" = "repl.module:symbol")'

# nvidia cells are L3 where the shim's own code ran on an NVIDIA GPU (tests/gpu, benchmarks/*_gpu.py and nano-vllm
# with CUDA graphs under `cudashim run`), else L0 (pass-through, untouched by the shim); ascend cells are L0 unless a contract
# test composes them with real torch_npu code (L1: tests/ascend/test_transfer_to_npu_contract.py runs the
# alias layer over the real transfer_to_npu.py) or they lower through TileLang (L2), and L1s where they ran on the
# simulated NPU (tests/simulated: the idiom table, the refusals, serve.py; tests/e2e -k simulated). cpu cells describe the
# emulated CUDA device (csrc/, cudashim/emulated/) and are L3 where a CI test runs them (tests/emulated and the
# idiom table tests/cpu/test_idioms.py the device, tests/cpu/test_cpu_limits.py the refusals under
# `cudashim run`, tests/kernels and tests/replacements the torch paths, tests/cpu/test_cpu_torchrun.py NCCL-as-Gloo
# with two ranks).
TABLE: tuple[Capability, ...] = (
    _cap("cuda_graphs", "CUDA graphs", "torch.cuda.CUDAGraph",
         nvidia=Entry(N, RAISE_CONSTRUCTION, "L3", "torch.cuda.CUDAGraph / torch.cuda.graph (nano-vllm captured "
               "its decode graphs under the shim on an NVIDIA GPU)"),
         ascend=Entry(E, RAISE_CONSTRUCTION, "L1s", "aliased to torch.npu.NPUGraph by transfer_to_npu; ran on the "
               "simulated NPU: the wheel's torch_npu/npu/graphs.py over the core's graph recorder, torch_npu's capture "
               "refusals in its words (tests/simulated/test_graphs_sim.py; nano-vllm TP=1/2 with enforce_eager=False)",
               _EAGER),
         cpu=Entry(E, RAISE_CALL, "L3", "the emulated device records the calls of a capture at its dispatcher and "
                   "replays them in C++ on the captured memory (tests/emulated/test_graphs.py; nano-vllm with "
                   "enforce_eager=False); CUDA's capture errors where CUDA raises them; torch.compile's "
                   "mode=\"reduce-overhead\" (Inductor's CUDA graph trees) over the device's private pools "
                   "(tests/emulated/test_compile_modes.py)")),
    _cap("cuda_graph_keep_graph", "CUDA graph keep_graph=True", "torch.cuda.CUDAGraph(keep_graph=True)",
         nvidia=Entry(N, RAISE_CONSTRUCTION, "L0", "keeps the raw cudaGraph_t (in-graph timers match its event nodes)"),
         ascend=Entry(U, RAISE_CALL, "L1s", "keep_graph=True is accepted and dropped (NPU graphs exist only "
               "instantiated); raw_cuda_graph() raises (ran on the simulated NPU)",
               "do not ask for the raw graph when not PLATFORM.is_gpu"),
         cpu=Entry(E, RAISE_CALL, "L3", "emulated device: keep_graph=True keeps the recorded calls until "
                   "instantiate() or the first replay; raw_cuda_graph() raises (no cudaGraph_t)",
                   "replay() the graph; do not ask for the raw graph when not PLATFORM.is_gpu")),
    _cap("cuda_graph_instantiate", "CUDAGraph.instantiate()", "torch.cuda.CUDAGraph.instantiate",
         nvidia=Entry(N, RAISE_CALL, "L0", "explicit instantiation after capture with keep_graph=True"),
         ascend=Entry(E, None, "L1s", "a no-op: an NPU graph is instantiated when capture ends (ran on the simulated NPU)"),
         cpu=Entry(E, RAISE_CALL, "L3", "emulated device: makes a kept capture replayable; raises as CUDA does "
                   "without a capture", "capture first")),
    _cap("graph_event_timers", "in-graph event timers", "CUDAGraphTimer",
         nvidia=Entry(N, RAISE_CALL, "L0", "event-record nodes inside a kept graph"),
         ascend=Entry(U, RAISE_CALL, "L1s", "NPU graph timer primitives are not implemented; raw_cuda_graph_exec() "
               "raises (ran on the simulated NPU)", "check the timer's supported() and time outside the graph"),
         cpu=Entry(U, RAISE_CALL, "L0", "the emulated device's graphs record calls, not event nodes",
               "check the timer's supported() and time outside the graph")),
    _cap("symmetric_memory", "symmetric memory", "torch.distributed._symmetric_memory",
         nvidia=Entry(N, RAISE_CALL, "L0", "symm_mem.empty / rendezvous over NVLink"),
         ascend=Entry(U, RAISE_CALL, "L1s", "no NPU implementation of symm_mem (the refusal ran on the simulated NPU)",
               "disable the intra-node symmetric-memory path (e.g. EPLB shuffle) and use process-group collectives"),
         cpu=Entry(U, RAISE_CALL, "L3", "no symm_mem on the emulated device",
               "disable the symmetric-memory path and use process-group collectives (Gloo)")),
    _cap("batch_invariant", "batch-invariant kernels", "batch-invariant mode",
         nvidia=Entry(N, RAISE_CONSTRUCTION, "L0", "batch-invariant + deterministic kernels"),
         ascend=Entry(U, RAISE_CONSTRUCTION, "L0", "NPU kernels are deterministic but not batch-invariant",
               "switch batch-invariant mode off; deterministic algorithms stay on"),
         cpu=Entry(E, WARN, "L0", "deterministic run to run; oneDNN matmul is not guaranteed batch-invariant",
               "compare results at a fixed batch size")),
    _cap("pdl", "programmatic dependent launch (PDL)", "set_pdl(True)",
         nvidia=Entry(N, RAISE_CALL, "L0", "Hopper and later (SM90+)"),
         ascend=Entry(E, WARN, "L0", "no NPU equivalent; kernels launch one after another (same results, slower)",
               "nothing to do; leave PDL off on ascend to silence this"),
         cpu=Entry(E, None, "L0", "a no-op: the emulated device runs each kernel when it is issued, in order")),
    _cap("fp8_einsum_output", "FP8 einsum output", "FP8 einsum output",
         nvidia=Entry(N, RAISE_CALL, "L0", "FP8 einsum output at granularity 32"),
         ascend=Entry(E, WARN, "L0", "switched off: BF16 output then cast (same values, more memory traffic)",
               "nothing to do; gate it on PLATFORM.is_gpu to silence this"),
         cpu=Entry(E, None, "L0", "BF16 output then cast through the torch reference")),
    _cap("per_token_cast_granularity", "per-token cast group size", "per_token_cast",
         nvidia=Entry(N, RAISE_CALL, "L3", "any multiple of 32 (the cuda kernel, g32/64/128, equals the torch backend on an NVIDIA GPU)"),
         ascend=Entry(E, WARN, "L2", "native g32 only (lowers to AscendC in CI); other multiples of 32 use the PyTorch "
               "reference (slower)",
               "use group size 32 for the native kernel"),
         cpu=Entry(E, None, "L3", "PyTorch reference, any multiple of 32 (tests/kernels runs g32/64/128 in CI)")),
    _cap("force_topk_bound", "sampler force_topk bound", "force_topk",
         nvidia=Entry(N, RAISE_CALL, "L0", "force_topk <= 16384", limit=16384),
         ascend=Entry(N, RAISE_CALL, "L0", "force_topk <= 4096 (UB/register budget of the Ascend sampler)",
               "lower force_topk to 4096 or less", limit=4096),
         cpu=Entry(N, None, "L0", "torch.topk: no bound")),
    _cap("kv_cache_fp8_fp32_scale", "KV cache: FP8 values + FP32 scale index", "FP8_FLOAT32_SF_INDEX KV cache format",
         nvidia=Entry(N, RAISE_CONSTRUCTION, "L0", "separate value and FP32 scale regions"),
         ascend=Entry(U, RAISE_CONSTRUCTION, "L0", "format removed from the NPU's supported KV formats",
               "use the packed UE8M0 KV cache format (PLATFORM.fp8_sf_type, int16 on ascend)"),
         cpu=Entry(E, None, "L0", "torch reference path (float8 storage, FP32 scales)")),
    _cap("host_register_pinning", "pinning existing host memory", "Platform.pin_host_memory",
         nvidia=Entry(N, WARN, "L3", "cudaHostRegister / cudaHostUnregister via torch.cuda.cudart()",
               "nothing to do; copies use the pageable path when registration fails"),
         ascend=Entry(N, WARN, "L0", "aclrtHostRegisterV2 via ctypes (tested against a fake libascendcl); a driver "
               "without it stops construction", "upgrade CANN if construction fails; otherwise copies use the "
               "pageable path"),
         cpu=Entry(E, None, "L3", "a no-op: the emulated device's memory is host memory already")),
    _cap("ipc_export_alignment", "IPC export address alignment", "IPC tensor export",
         nvidia=Entry(N, RAISE_CALL, "L0", "cudaIpcGetMemHandle: no extra requirement"),
         ascend=Entry(N, RAISE_CALL, "L0", "aclrtIpcMemGetExportKey needs a 2 MiB-aligned address (else 507899); "
               "import needs ENABLE_PEER_ACCESS", "allocate exported buffers 2 MiB-aligned", limit=2 * _MiB),
         cpu=Entry(U, RAISE_CALL, "L3", "cuda tensors of the emulated device do not cross processes: "
                   "torch.multiprocessing's CUDA IPC path raises 'CUDA is not available'",
                   "send host copies (.cpu()) through torch.multiprocessing, or use torch.distributed collectives"),
         limit_kind="align"),
    _cap("collective_backend", "device collectives backend", "torch.distributed (nccl)",
         nvidia=Entry(N, RAISE_CONSTRUCTION, "L3", "NCCL, min/max CTAs = CUDASHIM_NCCL_NUM_SMS"),
         ascend=Entry(E, RAISE_CONSTRUCTION, "L1s", "NCCL becomes HCCL; HCCL_* buffer/timeout/port defaults (nano-vllm "
               "TP=2 ran on simulated HCCL groups, Gloo underneath; never on real HCCL)"),
         cpu=Entry(E, RAISE_CONSTRUCTION, "L3", "NCCL becomes Gloo (host-side TCP) under NCCL's name: get_backend(), "
                   "get_backend_config(), ProcessGroup.name() answer as on a GPU, ProcessGroupNCCL.Options are accepted "
                   "(Gloo ignores them); the device's core hands Gloo CPU views of cuda tensors, flat "
                   "all_gather_into_tensor/reduce_scatter_tensor included; ProcessGroupNCCL(...) and torch.cuda.nccl's "
                   "collectives raise")),
    _cap("flash_attention", "flash attention", "flash_attn",
         nvidia=Entry(N, RAISE_CALL, "L3", "flash_attn when installed; a portable stand-in when it is not (cudashim.replacements "
               "on PyTorch's flash kernel and Triton paged kernels, checked on an NVIDIA GPU)"),
         ascend=Entry(E, RAISE_CALL, "L1s", "cudashim.replacements.flash_attn on torch_npu fused attention; the flash-attn "
               "-> NPU mapping checked numerically against CPU implementations of the documented operators "
               "(cudashim.emulated.npu.ops) and run end to end by nano-vllm on the simulated NPU; not run on an NPU"),
         cpu=Entry(E, RAISE_CALL, "L3", "cudashim.replacements.flash_attn's torch path stands in for flash_attn "
               "(tests/replacements checks it against a float64 oracle in CI)")),
    _cap("tilelang_kernels", "TileLang kernels", "tilelang kernel library",
         nvidia=Entry(N, RAISE_CALL, "L3", "cudashim.kernels.cuda (TileLang target cuda; equal to the torch backend on an NVIDIA GPU)"),
         ascend=Entry(E, RAISE_CALL, "L2", "cudashim.kernels.ascend (TileLang target ascend; every kernel lowers to AscendC in "
               "CI, none compiled with bisheng or run)"),
         cpu=Entry(E, RAISE_CALL, "L3", "cudashim.kernels.torch reference implementations (run in CI by tests/kernels)")),
    _cap("cuda_cpp_extensions", "CUDA C++ extensions", "torch.utils.cpp_extension.CUDAExtension",
         nvidia=Entry(N, RAISE_CALL, "L0", "built with nvcc"),
         ascend=Entry(U, RAISE_CALL, "L0", "CUDA sources do not build for the NPU",
               f"port the extension to AscendC (NpuExtension) or {_PATCH}"),
         cpu=Entry(U, RAISE_CALL, "L3", "CUDA sources do not build for the emulated device", _PATCH)),
    _cap("triton_kernels", "Triton kernels", "triton.jit kernel",
         nvidia=Entry(N, RAISE_CALL, "L0", "Triton CUDA backend"),
         ascend=Entry(N, RAISE_CALL, "L1", "through triton-ascend, its libdevice mapped onto its own functions (checked "
               "against the triton-ascend 3.2.0 wheel's files and frontend, not run on an NPU); with upstream Triton "
               "the first launch raises naming triton-ascend; the simulated NPU refuses and warns as triton-ascend "
               "would (L1s)", "pip install triton-ascend and source CANN's set_env.sh"),
         cpu=Entry(E, RAISE_CALL, "L3", "unchanged @triton.jit kernels (autotune, heuristics, nested jit) run "
               "through Triton's interpreter on the device's memory in place, with its gaps closed (float scalars, "
               "libdevice, bf16 computed in fp32 and rounded to nearest even, range loop indices); autotuning takes "
               "the first configuration; CUDA graphs record and replay launches; each launch is a graph break under "
               "torch.compile; tests/triton_route runs unmodified kernels of pinned Liger-Kernel, flash-linear-attention "
               "(fla-core), trinix and nano-vllm against torch references in CI, among them the patterns of "
               "Triton's tutorials (vector add, fused softmax, layer norm backward with its atomic lock, autotuned "
               "matmul with a nested activation; the tutorials are on no package index). A launch's program "
               "instances run at once where they take one path (the exact interpreter where they cannot: atomics "
               "across instances, divergent loops, an operation it does not know; --report names which and why): "
               "within 10x of the torch equivalent at the median of that corpus (benchmarks/results/"
               "triton_speed.json); inline assembly and compiled-kernel introspection (.n_regs, warmup()) raise",
               f"{_PATCH} (`cudashim run --report` lists each kernel's launcher with the line to add)")),
    _cap("cuda_device_semantics", "cuda:N tensors with CUDA's semantics", "device='cuda' tensors",
         nvidia=Entry(N, None, "L3", "the GPU itself (tests/emulated's checks pass on an NVIDIA GPU with the shim off)"),
         ascend=Entry(N, None, "L1s", "NPU tensors through transfer_to_npu (device type npu, not cuda; is_cuda is "
               "is_npu); ran with the wheel's transfer_to_npu on the simulated NPU (tests/simulated)"),
         cpu=Entry(E, RAISE_CONSTRUCTION, "L3", "the emulated device of csrc/: cuda:N tensors in host memory run by "
               "the CPU kernels (tests/emulated and the idiom table in CI); activation stops, naming the fix, "
               "when its native core cannot be built or loaded",
               "build the core with `python -m cudashim.emulated` (needs g++ and ninja)")),
    _cap("data_parallel", "single-process multi-device DataParallel", "torch.nn.DataParallel",
         nvidia=Entry(N, None, "L0", "torch.nn.DataParallel scatters over the GPUs"),
         ascend=Entry(U, RAISE_CONSTRUCTION, "L1s", "DataParallel looks for cuda:0 (torch._utils' device probe, "
               "bound before transfer_to_npu patches it) and replicates with CUDA-only communication; refused at "
               "construction (tests/simulated/test_idioms_sim.py)",
               "use DistributedDataParallel, one process per NPU (torchrun), or call the module itself"),
         cpu=Entry(E, None, "L3", "the emulated device scatters the batch over its cuda:N devices (tests/cpu/test_idioms.py)")),
)

_BY_ID: dict[str, Capability] = {c.id: c for c in TABLE}


def ids() -> tuple[str, ...]:
    return tuple(_BY_ID)


def get(name: str) -> Capability:
    try:
        return _BY_ID[name]
    except KeyError:
        raise ValueError(f"unknown capability {name!r}; known: {', '.join(_BY_ID)}") from None


def _platform_name(platform: Any) -> str:
    if platform is None:
        from .contract import platform_name

        return platform_name()
    name = getattr(platform, "name", platform)  # a Platform instance or class, or its name
    if name not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; use one of {', '.join(PLATFORMS)}")
    return name


def entry(name: str, platform: Any = None) -> Entry:
    """The cell for capability `name` on `platform` (default: the current platform)."""
    return get(name).cells[_platform_name(platform)]


def supported(name: str, platform: Any = None) -> bool:
    """True unless the platform cannot do it at all: for callers that branch instead of failing."""
    return entry(name, platform).status != U


_warned: set[tuple[str, str]] = set()


def require(name: str, platform: Any = None, api: str | None = None) -> None:
    """Raise CapabilityError when `platform` cannot do `name`; warn once where it only degrades; else nothing."""
    cap = get(name)
    plat = _platform_name(platform)
    cell = cap.cells[plat]
    what = api or cap.api
    if cell.status == U:
        raise CapabilityError(f"{what} is not available on {plat} ({cell.note}); {cell.way_out} [capability {name}]")
    if cell.failure == WARN and cell.status == E and (name, plat) not in _warned:
        _warned.add((name, plat))
        warnings.warn(f"{what} is degraded on {plat}: {cell.note}; {cell.way_out} [capability {name}]",
                      RuntimeWarning, stacklevel=2)


def limit(name: str, platform: Any = None) -> int | None:
    """The numeric bound of a capability on `platform` (e.g. force_topk_bound: 16384 / 4096); None: no bound."""
    return entry(name, platform).limit


def check_limit(name: str, value: int, platform: Any = None, api: str | None = None) -> None:
    """Raise CapabilityError when `value` breaks the platform's bound for capability `name`.

    "max" bounds (force_topk_bound) need value <= limit; "align" bounds (ipc_export_alignment) need an
    address that is a multiple of the limit.
    """
    cap = get(name)
    plat = _platform_name(platform)
    cell = cap.cells[plat]
    if cell.limit is None:
        return
    if cap.limit_kind == "align":
        if value % cell.limit:
            raise CapabilityError(
                f"{api or cap.api} at 0x{value:x} is not aligned to {cell.limit} bytes as {plat} requires "
                f"({cell.note}); {cell.way_out} [capability {name}]"
            )
    elif value > cell.limit:
        raise CapabilityError(
            f"{api or cap.api}={value} exceeds the {plat} bound of {cell.limit} ({cell.note}); "
            f"{cell.way_out or f'use at most {cell.limit}'} [capability {name}]"
        )


@_state.on_reset
def _reset() -> None:
    _warned.clear()


# ---- the README copy ------------------------------------------------------------------------------------

_BEGIN, _END = "<!-- capabilities:begin -->", "<!-- capabilities:end -->"
_SHORT = {RAISE_CONSTRUCTION: "raises at construction", RAISE_CALL: "raises at call", WARN: "warns once"}


def _cell_md(cap: Capability, cell: Entry) -> str:
    text = f"**{cell.status}**" if cell.status == U else cell.status
    if cell.limit is not None:
        text += f", aligned to {cell.limit} B" if cap.limit_kind == "align" else f" ≤ {cell.limit}"
    if cell.status == U or (cell.status == E and cell.failure == WARN):
        text += f", {_SHORT[cell.failure or RAISE_CALL]}"
    return f"{text} · {cell.level}"


def render_markdown() -> str:
    """The table as Markdown, exactly what README.md holds between the capabilities markers."""
    lines = [
        "Generated from `cudashim/platform/capabilities.py` (`python scripts/generate.py --write`). "
        "Levels: L0 written against the documented API, L1 contract-tested with real upstream code, "
        "L1s ran end to end on the simulated Ascend NPU (no NPU: CPU implementations, in CI), "
        "L2 compiled for the target, L3 ran on the hardware (CPU: in CI). "
        "`cudashim.require(id)` raises `CapabilityError` for **unsupported** cells.",
        "",
        "| capability | id | nvidia | ascend | cpu |",
        "|---|---|---|---|---|",
    ]
    for cap in TABLE:
        cells = " | ".join(_cell_md(cap, cap.cells[p]) for p in PLATFORMS)
        lines.append(f"| {cap.title} | `{cap.id}` | {cells} |")
    lines += ["", "Notes and ways out:", ""]
    for cap in TABLE:
        parts = []
        for p in PLATFORMS:
            c = cap.cells[p]
            parts.append(f"{p}: {c.note}" + (f" — way out: {c.way_out}" if c.way_out else ""))
        lines.append(f"- `{cap.id}` — " + "; ".join(parts) + ".")
    return "\n".join(lines)


def update_readme(path: Path | str, check: bool = False) -> bool:
    """Rewrite the text between the markers of `path` with render_markdown(); return True when it changed.

    With check=True nothing is written (a dry run for CI).
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        head, rest = text.split(_BEGIN, 1)
        _old, tail = rest.split(_END, 1)
    except ValueError:
        raise ValueError(f"{path}: the markers {_BEGIN} and {_END} are missing; add them where the table goes") from None
    new = f"{head}{_BEGIN}\n{render_markdown()}\n{_END}{tail}"
    if new != text and not check:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    """`python -m cudashim.platform.capabilities [--write|--check] [README.md]`: print, rewrite or check the table."""
    args = list(sys.argv[1:] if argv is None else argv)
    mode = args.pop(0) if args and args[0] in ("--write", "--check") else None
    readme = Path(args[0]) if args else Path(__file__).resolve().parents[2] / "README.md"
    if mode is None:
        print(render_markdown())
        return 0
    changed = update_readme(readme, check=mode == "--check")
    if mode == "--check":
        print(f"{readme}: capability table is {'stale; run python scripts/generate.py --write' if changed else 'current'}")
        return 1 if changed else 0
    print(f"{readme}: {'updated' if changed else 'already current'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
