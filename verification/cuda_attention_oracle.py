"""CUDA's answers for the attention operators only CUDA implements, asked of a real GPU (the shim off):

    CUDASHIM_DISABLE=1 python verification/cuda_attention_oracle.py --out benchmarks/results/cuda_attention_oracle.json

For each of _flash_attention_forward/_backward and _efficient_attention_forward/_backward (dense and
variable-length, causal or not, with cross lengths) and varlen_attn: every output's shape, strides, dtype
and device, and which reference its values match (float64 attention; causal masks aligned top-left or
bottom-right; log-sum-exp in natural log, in which layout). Then compiled flex attention (causal
block mask) forward and backward against causal SDPA in float32. The device's tests hold the device to
these facts (tests/emulated/test_cuda_only_attention.py).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def _meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "stride": list(x.stride()), "dtype": str(x.dtype).removeprefix("torch."),
                "device": x.device.type, "numel": x.numel()}
    if isinstance(x, (int, float, bool)) or x is None:
        return x
    return repr(x)


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: str | None, scale: float) -> tuple[Any, Any]:
    """float64 attention of (L, H, D) tensors: output (Lq, H, D) and log-sum-exp (H, Lq)."""
    q64, k64, v64 = (t.double().transpose(0, 1) for t in (q, k, v))  # (H, L, D)
    s = q64 @ k64.transpose(-1, -2) * scale
    lq, lk = s.shape[-2], s.shape[-1]
    if causal is not None:
        i = torch.arange(lq, device=s.device)[:, None]
        j = torch.arange(lk, device=s.device)[None, :]
        keep = j <= i if causal == "top_left" else j <= i + (lk - lq)
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    out = torch.softmax(s, -1).nan_to_num(0.0) @ v64
    return out.transpose(0, 1), lse


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    a, b = a.double(), b.double()
    both_inf = torch.isinf(a) & torch.isinf(b) & (a.sign() == b.sign())
    return bool(((a - b).abs() <= tol + tol * b.abs()).logical_or(both_inf).all())


def flash_cases() -> list[dict[str, Any]]:
    rows = []
    torch.manual_seed(0)
    H, D = 2, 16
    for lens_q, lens_k in (([5, 9], [5, 9]), ([3, 8], [6, 8])):
        for causal in (False, True):
            cq = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
            ck = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
            q = torch.randn(sum(lens_q), H, D, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(sum(lens_k), H, D, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(sum(lens_k), H, D, device="cuda", dtype=torch.bfloat16)
            scale = 1 / math.sqrt(D)
            row: dict[str, Any] = {"op": "_flash_attention_forward", "varlen": True, "lens_q": lens_q, "lens_k": lens_k,
                                   "causal": causal}
            try:
                res = torch.ops.aten._flash_attention_forward(q, k, v, cq, ck, max(lens_q), max(lens_k), 0.0, causal, False)
                row["outputs"] = [_meta(r) for r in res]
                out, lse = res[0], res[1]
                for align in ("top_left", "bottom_right"):
                    ok_out, ok_lse = True, {"(H,total_q)": True}
                    for b in range(len(lens_q)):
                        sq, sk = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
                        ro, rl = _reference(q[sq], k[sk], v[sk], align if causal else None, scale)
                        ok_out = ok_out and _close(out[sq], ro, 2e-2)
                        if lse.dim() == 2 and lse.shape[-1] == sum(lens_q):
                            ok_lse["(H,total_q)"] = ok_lse["(H,total_q)"] and _close(lse[:, sq], rl, 2e-2)
                        else:
                            ok_lse["(H,total_q)"] = False
                    row[f"matches_{align}"] = {"out": ok_out, "lse": ok_lse}
                g = torch.randn_like(out)
                grads = torch.ops.aten._flash_attention_backward(g, q, k, v, out, lse, cq, ck, max(lens_q), max(lens_k),
                                                                 0.0, causal, res[2], res[3])
                row["backward_outputs"] = [_meta(r) for r in grads]
                qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
                ref = []
                for b in range(len(lens_q)):
                    sq, sk = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
                    ro, _ = _reference(qd[sq], kd[sk], vd[sk], "bottom_right" if causal else None, scale)
                    ref.append(ro)
                torch.cat(ref).backward(g.double())
                row["backward_matches_bottom_right"] = all(_close(a, b.grad, 6e-2) for a, b in zip(grads, (qd, kd, vd)))
            except Exception as e:  # noqa: BLE001 - CUDA's refusal is an answer too
                row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
            rows.append(row)
    # dense (B, L, H, D)
    for causal in (False, True):
        q = torch.randn(2, 6, H, D, device="cuda", dtype=torch.float16)
        k = torch.randn(2, 10, H, D, device="cuda", dtype=torch.float16)
        v = torch.randn(2, 10, H, D, device="cuda", dtype=torch.float16)
        row = {"op": "_flash_attention_forward", "varlen": False, "shape_q": [2, 6, H, D], "shape_k": [2, 10, H, D],
               "causal": causal}
        try:
            res = torch.ops.aten._flash_attention_forward(q, k, v, None, None, 6, 10, 0.0, causal, False)
            row["outputs"] = [_meta(r) for r in res]
            ok = {}
            for align in ("top_left", "bottom_right"):
                ok[align] = all(_close(res[0][b], _reference(q[b], k[b], v[b], align if causal else None,
                                                              1 / math.sqrt(D))[0], 2e-2) for b in range(2))
                ok[align + "_lse_(B,H,Lq)"] = res[1].dim() == 3 and all(
                    _close(res[1][b], _reference(q[b], k[b], v[b], align if causal else None, 1 / math.sqrt(D))[1], 2e-2)
                    for b in range(2))
            row["matches"] = ok
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        rows.append(row)
    return rows


def efficient_cases() -> list[dict[str, Any]]:
    rows = []
    torch.manual_seed(1)
    H, D = 2, 16
    for causal_type in (0, 1, 2):  # none, causal from top left, causal from bottom right
        for compute_lse in (False, True):
            q = torch.randn(2, 6, H, D, device="cuda")
            k = torch.randn(2, 10, H, D, device="cuda")
            v = torch.randn(2, 10, H, D, device="cuda")
            row: dict[str, Any] = {"op": "_efficient_attention_forward", "custom_mask_type": causal_type,
                                   "compute_log_sumexp": compute_lse, "shape_q": [2, 6, H, D], "shape_k": [2, 10, H, D]}
            try:
                res = torch.ops.aten._efficient_attention_forward(q, k, v, None, None, None, None, None, 0.0, causal_type,
                                                                  compute_lse)
                row["outputs"] = [_meta(r) for r in res]
                align = {0: None, 1: "top_left", 2: "bottom_right"}[causal_type]
                row["out_matches"] = all(_close(res[0][b], _reference(q[b], k[b], v[b], align, 1 / math.sqrt(D))[0], 1e-4)
                                         for b in range(2))
                if compute_lse:
                    lse = res[1]
                    row["lse_matches_first_Lq"] = all(
                        _close(lse[b, :, :6], _reference(q[b], k[b], v[b], align, 1 / math.sqrt(D))[1], 1e-4)
                        for b in range(2))
                    if lse.shape[-1] > 6:
                        row["lse_padding_values"] = lse[0, 0, 6:].tolist()[:4]
                g = torch.randn_like(res[0])
                grads = torch.ops.aten._efficient_attention_backward(g, q, k, v, None, res[0], None, None, 6, 10, res[1],
                                                                     0.0, res[2], res[3], causal_type, False)
                row["backward_outputs"] = [_meta(r) for r in grads]
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
            rows.append(row)
    return rows


def varlen_case() -> dict[str, Any]:
    row: dict[str, Any] = {"op": "varlen_attn"}
    try:
        from torch.nn.attention.varlen import varlen_attn
        import inspect

        row["signature"] = str(inspect.signature(varlen_attn))
        torch.manual_seed(2)
        lens = [5, 9]
        cu = torch.tensor([0, 5, 14], dtype=torch.int32, device="cuda")
        q, k, v = (torch.randn(14, 2, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = varlen_attn(q, k, v, cu, cu, 9, 9)
        row["output"] = _meta(out)
        ok = True
        for b in range(2):
            s = slice(int(cu[b]), int(cu[b + 1]))
            ok = ok and _close(out[s].detach(), _reference(q[s].detach(), k[s].detach(), v[s].detach(), None,
                                                           0.25)[0], 2e-2)
        row["matches_per_sequence_attention"] = ok
        out.float().sum().backward()
        row["backward"] = [_meta(t.grad) for t in (q, k, v)]
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    return row


def flex_case() -> dict[str, Any]:
    row: dict[str, Any] = {"op": "compiled flex_attention vs causal SDPA, float32"}
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def causal(b: Any, h: Any, q: Any, kv: Any) -> Any:
            return q >= kv

        torch.manual_seed(3)
        n = 256
        mask = create_block_mask(causal, 1, 1, n, n, device="cuda")
        q, k, v = (torch.randn(2, 4, n, 32, device="cuda", requires_grad=True) for _ in range(3))
        out = torch.compile(flex_attention)(q, k, v, block_mask=mask)
        g = torch.randn_like(out)
        got = torch.autograd.grad(out, (q, k, v), g)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        want = torch.autograd.grad(ref, (q, k, v), g)
        row["forward_max_abs_diff"] = (out - ref).abs().max().item()
        row["backward_max_abs_diff"] = [(a - b).abs().max().item() for a, b in zip(got, want)]
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "host": platform.node(),
              "flash": flash_cases(), "efficient": efficient_cases(), "varlen_attn": varlen_case(), "flex": flex_case()}
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result)[:3000])


if __name__ == "__main__":
    main()
