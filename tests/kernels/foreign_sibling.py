"""
GEMM on gfx950 from shared pieces
=================================

In the style of AMD's gfx950 Gluon tutorials: the kernel is assembled from a helper module next to it
(`foreign_common`) and a layout from an earlier numbered lesson loaded with `importlib`. The scorer puts the
file's folder on the import path, as running `python foreign_sibling.py` from its folder would.
"""
import importlib

import torch
import triton
from foreign_common import blocked_load_layout, tile_pointers
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

lesson05 = importlib.import_module("foreign_05-mfma")


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD: gl.constexpr, MFMA: gl.constexpr):
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    a_ptrs = tile_pointers(a_ptr, pid_m * BLOCK_M, stride_am, BLOCK_M, BLOCK_K, LOAD)
    b_ptrs = tile_pointers(b_ptr, pid_n * BLOCK_N, stride_bn, BLOCK_N, BLOCK_K, LOAD)
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=MFMA)
    for k in range(0, K, BLOCK_K):
        a = gl.convert_layout(gl.load(a_ptrs + k), gl.DotOperandLayout(0, MFMA, 8))
        b = gl.convert_layout(gl.permute(gl.load(b_ptrs + k), (1, 0)), gl.DotOperandLayout(1, MFMA, 8))
        acc = gl.amd.cdna4.mfma(a, b, acc)
    rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, MFMA))
    cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, MFMA))
    gl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(c_ptr.dtype.element_ty))


def gemm(a, b, num_warps=4):
    """C = A @ B^T with B given N x K (K-contiguous)."""
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    gemm_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                      LOAD=blocked_load_layout(num_warps), MFMA=lesson05.mfma_layout(num_warps), num_warps=num_warps)
    return c
