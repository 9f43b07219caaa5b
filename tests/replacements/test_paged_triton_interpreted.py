"""The Triton paged kernels' arithmetic (decode split-KV, prefill flash-attention), run by Triton's CPU
interpreter (TRITON_INTERPRET=1) against the float64 oracle.

Runs in a fresh interpreter (the flag is read when kernels are defined). Skips where it cannot run:
no triton, or numpy >= 2.3 (the interpreter turns runtime loop bounds into Python ints, which those
numpy versions refuse) — so in CI (numpy 2.4) it skips; run it with numpy < 2.3 (it passes with
numpy 2.2.6 + triton 3.9.0). fp16 only: the interpreter's float32->bfloat16 cast is itself wrong
(checked by hand), so bf16 is covered on the GPU by tests/gpu/test_replacements_gpu.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys
    try:
        import numpy, triton  # noqa: F401
    except ImportError:
        sys.exit(77)
    if tuple(int(x) for x in numpy.__version__.split(".")[:2]) >= (2, 3):
        sys.exit(77)
    import torch
    from replacements_ref import make_paged, ref_attention
    from cudashim.replacements._paged_decode_triton import num_splits, paged_decode
    gen = torch.Generator().manual_seed(0)
    # (page, hq, hk, d, lengths, SMs): SMs=4 and 64 split the keys (split + combine kernels); SMs=1 gives
    # one split per (sequence, kv head), written directly by the first kernel — with an empty sequence too
    cases = [(16, 8, 2, 64, [1, 70, 200, 0], 4), (256, 4, 4, 128, [300, 5], 1), (16, 32, 8, 128, [130], 64),
             (16, 8, 8, 64, [0, 33], 1)]
    import cudashim.replacements._paged_decode_triton as dec
    shared = dec._workspace
    # split runs merge in the same launch (the last program of each (sequence, kv head) merges: eager
    # steps) or in a second kernel (what CUDA-graph capture takes); both are checked
    for fused, (page, hq, hk, d, lens, sms) in [(f, c) for f in (True, False) for c in cases]:
        dec._workspace = shared if fused else (lambda *a: None)
        ks = [torch.randn(n, hk, d, generator=gen).half() for n in lens]
        vs = [torch.randn(n, hk, d, generator=gen).half() for n in lens]
        p = make_paged(ks, vs, page, gen)
        q = torch.randn(len(lens), hq, d, generator=gen).half()
        cap = p.block_table.shape[1] * page
        assert (num_splits(len(lens), hk, cap, sms)[0] == 1) == (sms == 1), "the case covers the path it says"
        out, lse = paged_decode(q, p.k_cache, p.v_cache, p.block_table.int(), torch.tensor(lens, dtype=torch.int32),
                                0.1, cap, num_sms=sms)
        out_only, no_lse = paged_decode(q, p.k_cache, p.v_cache, p.block_table.int(),
                                        torch.tensor(lens, dtype=torch.int32), 0.1, cap, num_sms=sms, want_lse=False)
        assert no_lse is None and torch.equal(out_only, out)
        if fused and sms > 1:  # every merging program set its count back: the next step starts from zero
            assert all(int(c.abs().sum()) == 0 for c, _ in dec._workspaces.values()) and dec._workspaces
        for b, n in enumerate(lens):
            if n == 0:
                assert torch.all(out[b] == 0) and torch.all(torch.isinf(lse[b])), "empty sequence"
                continue
            ro, rl = ref_attention(q[b:b + 1], ks[b], vs[b], scale=0.1)
            # fp16 P in the PV product and the fp16 output: a few fp16 ulps of O(1) values
            assert (out[b].double() - ro[0]).abs().max() < 5e-3, (fused, page, b)
            assert (lse[b].double() - rl[:, 0]).abs().max() < 1e-3, (fused, page, b)
    dec._workspace = shared
    from cudashim.replacements._paged_prefill_triton import paged_prefill
    from replacements_ref import cu
    # prefill: ragged (lengths 1, more queries than keys), GQA, causal or not, a page that a key tile
    # divides (256) and one smaller than the tile (16), the default tiles and small ones
    for page, causal, config in ((16, True, None), (256, True, None), (16, False, (16, 16, 4, 1)),
                                 (256, False, (32, 64, 4, 1)), (16, True, (16, 32, 4, 1))):
        hq, hk, d = 8, 2, 64
        lq, lk = [5, 1, 40, 7], [300, 1, 33, 3]
        ks = [torch.randn(n, hk, d, generator=gen).half() for n in lk]
        vs = [torch.randn(n, hk, d, generator=gen).half() for n in lk]
        p = make_paged(ks, vs, page, gen)
        q = torch.randn(sum(lq), hq, d, generator=gen).half()
        # key lengths as (B,) or as flash-attn's cu_seqlens_k (B+1,)
        keys = cu(lk) if config is None else torch.tensor(lk, dtype=torch.int32)
        out, lse = paged_prefill(q, p.k_cache, p.v_cache, p.block_table, cu(lq), keys, max(lq), 0.1, causal,
                                 config=config)
        c = cu(lq).tolist()
        for b in range(len(lq)):
            ro, rl = ref_attention(q[c[b]:c[b + 1]], ks[b], vs[b], scale=0.1, causal=causal)
            assert (out[c[b]:c[b + 1]].double() - ro).abs().max() < 5e-3, (page, causal, config, b)
            assert torch.equal(torch.isinf(lse[:, c[b]:c[b + 1]]), torch.isinf(rl)), (page, causal, config, b)
            fin = torch.isfinite(rl)
            assert (lse[:, c[b]:c[b + 1]].double()[fin] - rl[fin]).abs().max() < 1e-3, (page, causal, config, b)
    print("ok")
    """
)


def test_paged_kernels_match_float64_reference_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode == 77:
        pytest.skip("triton's CPU interpreter is unavailable here (no triton, or numpy >= 2.3)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")
