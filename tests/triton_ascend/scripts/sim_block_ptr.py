"""Block pointers (Triton 3.2's language, triton-ascend's) on the route's interpreter: the kernels of
tests/triton_ascend/_block_kernels.py against torch, their refusals, the batched executor's reason, and
flash-linear-attention's chunk_simple_gla (its Ascend branch on the simulated NPU) against a float64 oracle.
Runs under `cudashim run` on either platform; one JSON line at the end: case -> ["ok", detail] or
[exception type, message]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[2] / "triton_route" / "scripts"))
import _block_kernels as BK  # noqa: E402

out: dict[str, list] = {}


def case(name: str, fn) -> None:
    try:
        out[name] = ["ok", fn()]
    except BaseException as e:  # noqa: BLE001
        out[name] = [type(e).__name__, str(e)[:800]]


def rnd(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to("cuda")


def tile_affine_rowsum():
    M, N = 37, 50
    x = rnd(N, M, seed=1).t()  # strided: columns contiguous
    buf = torch.full((40, 64), -7.0, device="cuda")
    y = buf[:M, :N]
    s = torch.full((48,), -7.0, device="cuda")
    BK.tile_affine_rowsum_kernel[(3,)](x, y, s, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BM=16, BN=32)
    outside = torch.ones_like(buf, dtype=torch.bool)
    outside[:M, :N] = False
    return {"y": float((y - (2 * x + 1)).abs().max()), "rowsum": float((s[:M] - x.sum(1)).abs().max()),
            "untouched": bool((buf[outside] == -7).all() and (s[M:] == -7).all())}


def nan_pad():
    x = rnd(5, seed=2)
    o = torch.zeros(8, device="cuda")
    BK.nan_pad_kernel[(1,)](x, o, 5, BLOCK=8)
    return {"inside": bool(torch.equal(o[:5], x)), "padding_nan": bool(o[5:].isnan().all())}


def block_matmul():
    M, N, K = 20, 24, 40
    a = rnd(M, K, seed=3)
    b = rnd(N, K, seed=4).t()  # column-major
    c = torch.zeros(M, N, device="cuda")
    BK.block_matmul_kernel[(2, 2)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                   c.stride(0), c.stride(1), BM=16, BN=16, BK=16)
    return float((c.double() - a.double() @ b.double()).abs().max())


def mask_with_block_ptr():
    BK.mask_with_block_ptr_kernel[(1,)](torch.zeros(8, device="cuda"), 8, BLOCK=8)


def boundary_check_on_pointers():
    BK.boundary_check_on_pointers_kernel[(1,)](torch.zeros(8, device="cuda"), 8, BLOCK=8)


def fla_chunk_simple_gla():
    import corpus

    return corpus.fla_chunk_simple_gla()


def paths():
    from cudashim.triton_route import launch

    return {k["kernel"].rpartition(":")[2]: k["paths"] for k in launch.stats()}


if __name__ == "__main__":
    out["npu"] = ["ok", hasattr(torch, "npu") and torch.npu.is_available()]
    case("fla_npu_branch", lambda: __import__("fla.utils", fromlist=["IS_NPU"]).IS_NPU)
    for f in (tile_affine_rowsum, nan_pad, block_matmul, mask_with_block_ptr, boundary_check_on_pointers,
              fla_chunk_simple_gla, paths):
        if f.__name__ in sys.argv[1:] or not sys.argv[1:]:
            case(f.__name__, f)
    print(json.dumps(out))
