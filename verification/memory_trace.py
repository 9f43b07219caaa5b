"""The caching allocator's statistics after every step of fixed programs, for comparing a GPU with the
emulated device under a profile.

    CUDASHIM_DISABLE=1 python verification/memory_trace.py OUT.json                      # on the GPU
    python -m cudashim run --profile h200 verification/memory_trace.py OUT.json          # emulated
    python verification/memory_trace.py --compare GPU.json EMULATED.json [--json RESULT.json]
    ... memory_trace.py --detail DIR --programs a,b OUT.json    # also DIR/NAME.json per program (below)

Programs (each in a fresh process of the same interpreter and environment, with a compiler cache of
its own, so none inherits another's cache, cuBLAS workspaces or compiled code; `--programs a,b`
picks some):
  allocations           a fixed sequence of allocations and frees (sizes around every boundary of the
                        allocator: 512 bytes, 1 MiB, 10 MiB, 2 MiB rounding), then a seeded random one
  allocations_expandable  the same under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  mlp                   three training steps of a small MLP with AdamW (cuBLAS's workspaces included)
  transformer_eager     three training steps of a small transformer (attention written out, RMSNorm,
                        GELU MLP, AdamW) on random inputs
  transformer_compiled  the same model under torch.compile (default mode)
  nano_vllm_eager       nano-vllm (nano-vllm-fork) serving 8 requests on a tiny local Qwen3 checkpoint,
                        one row per engine step, enforce_eager=True
  nano_vllm_graphs      the same with its CUDA graphs captured (enforce_eager=False)

The nano-vllm programs build their checkpoint here (fixed shapes, a word-level tokenizer: no
training, no hub) unless --model DIR names one, and give the engine the same attention on both
sides: a flash_attn module and a KV-cache store written in plain torch (flash-attn's and Triton's own
buffers are not what is compared; the engine's are). After each step the JSON holds
memory_allocated(), memory_reserved(), max_memory_allocated() and max_memory_reserved().
--compare prints, per program, the steps whose four numbers differ (exits 1 when any do) and with
--json writes the comparison.

--detail DIR also writes, per program, DIR/NAME.json: memory_snapshot()'s segments after every step
(pool id, small or large, size, and each block's size, negative when free) and, where the allocator
records history (a GPU), its trace: every allocation, free and segment event with its time and, for
segment events and allocations of 512 KiB or more, the innermost Python frames that made it. The
step times (the trace's clock) place the events between steps.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

MiB = 2**20
ROOT = Path(__file__).resolve().parents[1]
BOUNDARY_SIZES = [1, 511, 512, 513, 1000, 4096, MiB - 1, MiB, MiB + 1, 2 * MiB, 5 * MiB, 9 * MiB + 900 * 1024,
                  10 * MiB, 10 * MiB + 1, 19 * MiB + MiB // 2, 20 * MiB, 33 * MiB, 100 * MiB, 513 * MiB]
COLUMNS = ["step", "allocated", "reserved", "max_allocated", "max_reserved"]
Record = Callable[[str], None]


def _numbers(torch: Any) -> list[int]:
    return [torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.max_memory_allocated(),
            torch.cuda.max_memory_reserved()]


def allocations(torch: Any, record: Record, model: str | None) -> None:
    live: list[Any] = []

    def alloc(n: int) -> None:
        live.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        record(f"alloc {n}")

    for n in BOUNDARY_SIZES:
        alloc(n)
    for i in range(len(live) - 1, -1, -2):  # every other one, from the end
        del live[i]
        record(f"free #{i}")
    for n in (3 * MiB, 700, 15 * MiB, 64 * MiB):
        alloc(n)
    torch.cuda.empty_cache()
    record("empty_cache")
    live.clear()
    record("free all")
    torch.cuda.empty_cache()
    record("empty_cache")
    rng = random.Random(0)
    for step in range(400):
        if live and rng.random() < 0.4:
            del live[rng.randrange(len(live))]
            record("free")
        else:
            alloc(int(2 ** rng.uniform(0, 27)))  # 1 byte .. 128 MiB, log-uniform
        if step % 100 == 99:
            torch.cuda.empty_cache()
            record("empty_cache")
    live.clear()
    record("free all")


def _train(torch: Any, record: Record, model: Any, params: Any, x: Any, steps: int = 3) -> None:
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    record("input")
    for step in range(steps):
        loss = model(x).square().mean()
        record(f"forward {step}")
        loss.backward()
        record(f"backward {step}")
        opt.step()
        record(f"step {step}")
        opt.zero_grad(set_to_none=True)
        del loss
        record(f"zero_grad {step}")


def mlp(torch: Any, record: Record, model: str | None) -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
    record("model")
    _train(torch, record, net, net.parameters(), torch.randn(64, 256, device="cuda"))


def _transformer(torch: Any) -> Any:
    """A small pre-norm transformer over continuous inputs, built from operators whose device memory is
    their outputs (no embedding, no fused attention or norm kernels with buffers of their own)."""
    nn = torch.nn

    class RMSNorm(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x: Any) -> Any:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, t: int) -> None:
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("causal", torch.ones(t, t, dtype=torch.bool).triu(1))

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
            att = att.masked_fill(self.causal[:t, :t], float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))

    class Net(nn.Module):
        def __init__(self, d_in: int = 64, d: int = 128, heads: int = 4, layers: int = 2, t: int = 64) -> None:
            super().__init__()
            self.inp = nn.Linear(d_in, d)
            self.blocks = nn.ModuleList(Block(d, heads, t) for _ in range(layers))
            self.norm, self.out = RMSNorm(d), nn.Linear(d, d_in)

        def forward(self, x: Any) -> Any:
            x = self.inp(x)
            for blk in self.blocks:
                x = blk(x)
            return self.out(self.norm(x))

    return Net


def _transformer_program(torch: Any, record: Record, compiled: bool) -> None:
    torch.manual_seed(0)
    net = _transformer(torch)().cuda()
    record("model")
    run = torch.compile(net) if compiled else net
    _train(torch, record, run, net.parameters(), torch.randn(8, 64, 64, device="cuda"))


def transformer_eager(torch: Any, record: Record, model: str | None) -> None:
    _transformer_program(torch, record, compiled=False)


def transformer_compiled(torch: Any, record: Record, model: str | None) -> None:
    _transformer_program(torch, record, compiled=True)


# --- nano-vllm -------------------------------------------------------------------------------------

VOCAB = 4096


def build_checkpoint(out: Path) -> None:
    """A tiny Qwen3 checkpoint with fixed shapes: random bf16 weights and a word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    vocab = {"<|endoftext|>": 0, "<|pad|>": 1, **{f"w{i}": i for i in range(2, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|pad|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>").save_pretrained(out)
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
                         rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, eos_token_id=0,
                         pad_token_id=1, bos_token_id=0, torch_dtype="bfloat16")
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def _attend(torch: Any, q: Any, k: Any, v: Any, scale: float, mask: Any) -> Any:
    """q (B, H, Lq, D), k and v (B, Hkv, Lk, D), mask (B or 1, 1, Lq, Lk) True where not attended."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        b, h, lk, d = k.shape
        k = k[:, :, None].expand(b, h, rep, lk, d).reshape(b, h * rep, lk, d)
        v = v[:, :, None].expand(b, h, rep, lk, d).reshape(b, h * rep, lk, d)
    s = (q.float() @ k.float().transpose(-2, -1)) * scale
    return (s.masked_fill(mask, float("-inf")).softmax(-1) @ v.float()).to(q.dtype)


def _flash_attn_module(torch: Any) -> types.ModuleType:
    """flash_attn's two functions as nano-vllm calls them, in plain torch (the same on both sides)."""

    def flash_attn_varlen_func(q: Any, k: Any, v: Any, max_seqlen_q: int, cu_seqlens_q: Any, max_seqlen_k: int,
                               cu_seqlens_k: Any, softmax_scale: float, causal: bool = True,
                               block_table: Any = None, **_: Any) -> Any:
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()  # prefill runs eagerly, never captured
        outs = []
        for i in range(len(cq) - 1):
            lq, lk = cq[i + 1] - cq[i], ck[i + 1] - ck[i]
            if block_table is None:
                ki, vi = k[ck[i]:ck[i + 1]], v[ck[i]:ck[i + 1]]
            else:  # the paged cache (prefix caching): the sequence's blocks, in order
                blocks = block_table[i, :math.ceil(lk / k.shape[1])].long()
                ki, vi = (c[blocks].flatten(0, 1)[:lk] for c in (k, v))
            pos = torch.arange(lk, device=q.device)
            mask = (pos[None, :] > pos[lk - lq:, None])[None, None] if causal else pos[None, None, None, :] < 0
            outs.append(_attend(torch, q[cq[i]:cq[i + 1]].transpose(0, 1)[None], ki.transpose(0, 1)[None],
                                vi.transpose(0, 1)[None], softmax_scale, mask)[0].transpose(0, 1))
        return torch.cat(outs)

    def flash_attn_with_kvcache(q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any, block_table: Any,
                                softmax_scale: float, causal: bool = True, **_: Any) -> Any:
        # decode, q (B, 1, H, D); no host synchronization (nano-vllm captures this)
        b, nb = block_table.shape
        blocks = block_table.clamp(min=0).long()
        k = k_cache[blocks].flatten(1, 2).transpose(1, 2)  # (B, Hkv, nb * block, D)
        v = v_cache[blocks].flatten(1, 2).transpose(1, 2)
        pos = torch.arange(k.shape[2], device=q.device)
        mask = (pos[None, :] >= cache_seqlens[:, None])[:, None, None, :]
        return _attend(torch, q.transpose(1, 2), k, v, softmax_scale, mask).transpose(1, 2)

    mod = types.ModuleType("flash_attn")
    mod.flash_attn_varlen_func = flash_attn_varlen_func  # type: ignore[attr-defined]
    mod.flash_attn_with_kvcache = flash_attn_with_kvcache  # type: ignore[attr-defined]
    return mod


def _store_kvcache(torch: Any) -> Callable[..., None]:
    def store_kvcache(key: Any, value: Any, k_cache: Any, v_cache: Any, slot_mapping: Any) -> None:
        n = key.shape[0]
        slots = slot_mapping.long()
        keep = (slots < 0)[:, None]  # a captured batch's padding rows (-1) write nothing
        slots = slots.clamp(min=0)
        for new, cache in ((key, k_cache), (value, v_cache)):
            flat = cache.view(-1, new.shape[1] * new.shape[2])
            flat.index_copy_(0, slots, torch.where(keep, flat.index_select(0, slots), new.reshape(n, -1)))

    return store_kvcache


def _nano_vllm(torch: Any, record: Record, model: str | None, graphs: bool) -> None:
    sys.modules["flash_attn"] = _flash_attn_module(torch)
    import nanovllm.layers.attention as attention
    import nanovllm.models.qwen3 as qwen3
    from nanovllm import LLM, SamplingParams

    attention.store_kvcache = _store_kvcache(torch)
    init = qwen3.Qwen3Attention.__init__

    def attention_init(self: Any, *args: Any, rope_theta: float = 10000, rope_scaling: Any = None, **kw: Any) -> None:
        # transformers 5 gives the RoPE base as rope_scaling={"rope_theta": ..., "rope_type": "default"},
        # which this nano-vllm release refuses
        if isinstance(rope_scaling, dict) and rope_scaling.get("rope_type", "default") == "default":
            rope_theta, rope_scaling = float(rope_scaling.get("rope_theta", rope_theta)), None
        init(self, *args, rope_theta=rope_theta, rope_scaling=rope_scaling, **kw)

    qwen3.Qwen3Attention.__init__ = attention_init
    assert model is not None
    llm = LLM(model, enforce_eager=not graphs, tensor_parallel_size=1, max_model_len=512, max_num_batched_tokens=1024,
              max_num_seqs=16, gpu_memory_utilization=0.02)
    record("engine")
    rng = random.Random(0)
    for _ in range(8):
        prompt = [rng.randrange(2, VOCAB) for _ in range(rng.randint(16, 120))]
        llm.add_request(prompt, SamplingParams(temperature=0.6, max_tokens=rng.randint(8, 24), ignore_eos=True))
    step = 0
    while not llm.is_finished():
        llm.step()
        record(f"engine step {step}")
        step += 1
    llm.exit()
    atexit.unregister(llm.exit)  # the engine registered it; it has run
    record("exit")


def nano_vllm_eager(torch: Any, record: Record, model: str | None) -> None:
    _nano_vllm(torch, record, model, graphs=False)


def nano_vllm_graphs(torch: Any, record: Record, model: str | None) -> None:
    _nano_vllm(torch, record, model, graphs=True)


def allocations_expandable(torch: Any, record: Record, model: str | None) -> None:
    allocations(torch, record, model)  # in a process with expandable segments (ENV below)


PROGRAMS = {f.__name__: f for f in (allocations, allocations_expandable, mlp, transformer_eager, transformer_compiled,
                                    nano_vllm_eager, nano_vllm_graphs)}
ENV = {"allocations_expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


def _segments(torch: Any) -> list[list[Any]]:
    """memory_snapshot()'s segments in address order: [pool id, "small"/"large", size, blocks], a block
    by its size, negative when free."""
    return [[list(s.get("segment_pool_id") or (0, 0)), s.get("segment_type", ""), s["total_size"],
             [b["size"] if b["state"] == "active_allocated" else -b["size"] for b in s["blocks"]]]
            for s in sorted(torch.cuda.memory_snapshot(), key=lambda s: s["address"])]


def _frames(entry: dict[str, Any], keep: int = 12) -> list[str]:
    out = []
    for fr in entry.get("frames", [])[:keep]:
        path = str(fr.get("filename", ""))
        for marker in ("site-packages/", "dist-packages/", "benchmarks/"):
            if marker in path:
                path = path.split(marker, 1)[1]
                break
        out.append(f"{path}:{fr.get('line')}:{fr.get('name')}")
    return out


def _history(torch: Any) -> list[list[Any]] | None:
    """The allocator's recorded trace, or None where it keeps none."""
    try:
        snap = torch.cuda.memory._snapshot()
    except Exception:
        return None
    out = []
    for trace in snap.get("device_traces", []):
        for e in trace:
            action, size = e.get("action"), int(e.get("size", 0))
            keep = action.startswith("segment") or (action == "alloc" and size >= 512 * 1024)
            out.append([action, int(e.get("addr", 0)), size, int(e.get("stream", 0)), int(e.get("time_us", 0)),
                        _frames(e) if keep else []])
    return out


def _watch_autotuning(torch: Any, events: list[list[Any]]) -> None:
    """Where Inductor's Triton kernels are (a GPU): each kernel's first launch with its number of configs,
    and each autotuning with its mutated arguments, as [what, kernel, configs, mutated, allocated, time]."""
    import time

    try:
        from torch._inductor.runtime import triton_heuristics as th
    except Exception:
        return
    tuner = th.CachingAutotuner
    run, bench_all = tuner.run, tuner.benchmark_all_configs
    seen: set[int] = set()

    def note(what: str, self: Any) -> None:
        events.append([what, self.inductor_meta.get("kernel_name", self.fn.__name__), len(self.launchers),
                       sorted(self.mutated_arg_names), torch.cuda.memory_allocated(), int(time.time() * 1e6)])

    def first_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if id(self) not in seen:
            seen.add(id(self))
            if not self.launchers:
                self.precompile()
            note("launch", self)
        return run(self, *args, **kwargs)

    def benchmark_all_configs(self: Any, *args: Any, **kwargs: Any) -> Any:
        note("autotune", self)
        return bench_all(self, *args, **kwargs)

    tuner.run = first_run
    tuner.benchmark_all_configs = benchmark_all_configs


def run_one(name: str, model: str | None, out: str, detail: str | None = None) -> None:
    import time

    import torch

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    steps: list[list[Any]] = []
    snaps: list[list[Any]] = []
    kernels: list[list[Any]] = []
    if detail:
        _watch_autotuning(torch, kernels)
        try:
            torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
        except Exception as e:  # the emulated device keeps no history; the segments still come
            print(f"{name}: no allocation history ({type(e).__name__})", file=sys.stderr)

    def record(label: str) -> None:
        steps.append([label, *_numbers(torch)])
        if detail:
            snaps.append([label, int(time.time() * 1e6), _segments(torch)])

    PROGRAMS[name](torch, record, model)
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "steps": steps}, f)
    if detail:
        Path(detail).mkdir(parents=True, exist_ok=True)
        with open(Path(detail) / f"{name}.json", "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "steps": snaps,
                       "trace": _history(torch), "kernels": kernels}, f)


def _fresh_caches(tmp: str, name: str) -> dict[str, str]:
    """A compiler cache of the program's own: Inductor keeps each kernel's autotuned config on disk, and
    a kernel whose config it finds there is not autotuned again (its benchmarking allocates)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / f"inductor-{name}"),
            "TRITON_CACHE_DIR": str(Path(tmp) / f"triton-{name}")}


def main(out: str, names: list[str], model: str | None, detail: str | None = None) -> int:
    result: dict[str, Any] = {"programs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        if model is None and any(n.startswith("nano_vllm") for n in names):
            model = str(Path(tmp) / "qwen3-tiny")
            subprocess.run([sys.executable, __file__, "--checkpoint", model], check=True)
        for name in names:
            part = str(Path(tmp) / f"{name}.json")
            proc = subprocess.run([sys.executable, __file__, "--program", name, "--model", model or "", part,
                                   *(["--detail", str(Path(detail).resolve())] if detail else [])],
                                  env={**os.environ, **ENV.get(name, {}), **_fresh_caches(tmp, name)})
            if proc.returncode != 0:
                print(f"{name}: failed (exit {proc.returncode})", file=sys.stderr)
                result["programs"][name] = {"columns": COLUMNS, "steps": [], "error": f"exit {proc.returncode}"}
                continue
            with open(part) as f:
                got = json.load(f)
            result.update(torch=got["torch"], device=got["device"])
            result["programs"][name] = {"columns": COLUMNS, "steps": got["steps"]}
    with open(out, "w") as f:
        json.dump(result, f, indent=0)
    counts = ", ".join(f"{k} {len(v['steps'])} steps" for k, v in result["programs"].items())
    print(f"wrote {out}: {counts}")
    return 1 if any("error" in v for v in result["programs"].values()) else 0


def compare(a_path: str, b_path: str, json_out: str | None = None) -> int:
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    bad = 0
    figures: dict[str, Any] = {}
    for name in dict.fromkeys([*a["programs"], *b["programs"]]):
        prog = a["programs"].get(name, {"steps": []})
        other = b["programs"].get(name, {"steps": []})["steps"]
        diffs = [(i, s, t) for i, (s, t) in enumerate(zip(prog["steps"], other)) if s != t]
        same = len(prog["steps"]) == len(other) and bool(other) and not diffs
        print(f"{name}: {len(prog['steps'])} steps, {'equal' if same else f'{len(diffs)} differ'}"
              + ("" if len(prog["steps"]) == len(other) else f" (the other side has {len(other)} steps)"))
        for i, s, t in diffs[:10]:
            print(f"  step {i}: {s} != {t}")
        figures[name] = {"steps": len(prog["steps"]), "other_steps": len(other), "differ": len(diffs), "equal": same,
                         "first_differences": [[i, s, t] for i, s, t in diffs[:5]]}
        bad += not same
    if json_out is not None:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from _results import record

        record(Path(json_out).stem, {"a": a_path, "b": b_path, "programs": figures},
               goal="every program's four numbers equal after every step on the GPU and under its profile",
               out=Path(json_out))
    return 1 if bad else 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    if len(argv) >= 3 and argv[0] == "--compare":
        rest = argv[3:]
        sys.exit(compare(argv[1], argv[2], rest[1] if len(rest) == 2 and rest[0] == "--json" else None))
    if len(argv) == 2 and argv[0] == "--checkpoint":
        build_checkpoint(Path(argv[1]))
        sys.exit(0)
    if len(argv) in (5, 7) and argv[0] == "--program":
        run_one(argv[1], argv[3] or None, argv[4], argv[6] if len(argv) == 7 else None)
        sys.exit(0)
    names, model, detail, positional = list(PROGRAMS), None, None, []
    while argv:
        arg = argv.pop(0)
        if arg == "--programs" and argv:
            names = argv.pop(0).split(",")
        elif arg == "--model" and argv:
            model = argv.pop(0)
        elif arg == "--detail" and argv:
            detail = argv.pop(0)
        else:
            positional.append(arg)
    unknown = [n for n in names if n not in PROGRAMS]
    if len(positional) != 1 or unknown:
        sys.exit(f"{__doc__}\nunknown programs: {unknown}; known: {', '.join(PROGRAMS)}" if unknown else __doc__)
    sys.exit(main(positional[0], names, model, detail))
