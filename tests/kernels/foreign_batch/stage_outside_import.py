"""A tutorial-style stage that needs what the scorer used to withhold: a helper module outside its folder
(`--path ../foreign_utils`), a variable from its authors' shell (`--env TILE_MNK=64,64,32`), harmless imports
(os, argparse, pytest) and a cuBLAS comparison through triton._C in a branch that runs only with a GPU."""
import argparse
import os

import pytest
import torch
import triton
from outside_helpers import mfma_step, tile_from_env
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

if torch.cuda.is_available():
    from triton._C.libtriton import nvidia  # noqa: F401 - the tutorial's cuBLAS baseline, GPU only

VERBOSE = os.environ.get("STAGE_VERBOSE") == "1"


@gluon.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr):
    load_a: gl.constexpr = gl.BlockedLayout([1, 8], [16, 4], [4, 1], [1, 0])
    load_b: gl.constexpr = gl.BlockedLayout([8, 1], [4, 16], [1, 4], [0, 1])
    mfma: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                              warps_per_cta=[2, 2])
    rm = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_a))
    ka = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load_a))
    kb = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, load_b))
    rn = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, load_b))
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mfma)
    for k in range(0, K, BLOCK_K):
        a = gl.load(a_ptr + rm[:, None] * stride_am + (k + ka)[None, :] * stride_ak)
        b = gl.load(b_ptr + (k + kb)[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc = mfma_step(a, b, acc, mfma)
    om = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mfma))
    on = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mfma))
    gl.store(c_ptr + om[:, None] * stride_cm + on[None, :] * stride_cn, acc.to(gl.float16))


def matmul(a, b):
    block_m, block_n, block_k = tile_from_env()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4)
    return c


@pytest.mark.parametrize("M", [256])
def test_matmul(M):
    a = torch.randn(M, M, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(matmul(a, a), a @ a)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-M", type=int, default=4096)
    print(parser.parse_args())
