"""Kernels written in Triton 3.2's block-pointer language (triton-ascend's): tiles by `tl.make_block_ptr`,
moved by `tl.advance`, loaded and stored with `boundary_check` and `padding_option`."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_affine_rowsum_kernel(x, y, s, M, N, sxm, sxn, sym, syn, BM: tl.constexpr, BN: tl.constexpr):
    """y = 2 x + 1 and s = x's row sums, walking each row band's columns with tl.advance."""
    pid = tl.program_id(0)
    p_x = tl.make_block_ptr(x, (M, N), (sxm, sxn), (pid * BM, 0), (BM, BN), (1, 0))
    p_y = tl.make_block_ptr(y, (M, N), (sym, syn), (pid * BM, 0), (BM, BN), (1, 0))
    acc = tl.zeros((BM,), dtype=tl.float32)
    for _ in range(0, tl.cdiv(N, BN)):
        b = tl.load(p_x, boundary_check=(0, 1), padding_option="zero")
        acc += tl.sum(b, axis=1)
        tl.store(p_y, (b * 2.0 + 1.0).to(p_y.dtype.element_ty), boundary_check=(1, 0))
        p_x = tl.advance(p_x, (0, BN))
        p_y = p_y.advance((0, BN))
    p_s = tl.make_block_ptr(s, (M,), (1,), (pid * BM,), (BM,), (0,))
    tl.store(p_s, acc, boundary_check=(0,))


@triton.jit
def nan_pad_kernel(x, out, N, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x, (N,), (1,), (0,), (BLOCK,), (0,))
    b = tl.load(p, boundary_check=(0,), padding_option="nan")
    tl.store(out + tl.arange(0, BLOCK), b)


@triton.jit
def block_matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b, b addressed column-major (order (0, 1)), K walked with tl.advance and zero padding."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    p_a = tl.make_block_ptr(a, (M, K), (sam, sak), (pm * BM, 0), (BM, BK), (1, 0))
    p_b = tl.make_block_ptr(b, (K, N), (sbk, sbn), (0, pn * BN), (BK, BN), (0, 1))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc += tl.dot(tl.load(p_a, boundary_check=(0, 1)), tl.load(p_b, boundary_check=(0, 1)))
        p_a = tl.advance(p_a, (0, BK))
        p_b = tl.advance(p_b, (BK, 0))
    p_c = tl.make_block_ptr(c, (M, N), (scm, scn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(p_c, acc, boundary_check=(0, 1))


@triton.jit
def mask_with_block_ptr_kernel(x, N, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x, (N,), (1,), (0,), (BLOCK,), (0,))
    tl.load(p, mask=tl.arange(0, BLOCK) < N)


@triton.jit
def boundary_check_on_pointers_kernel(x, N, BLOCK: tl.constexpr):
    tl.load(x + tl.arange(0, BLOCK), boundary_check=(0,))
