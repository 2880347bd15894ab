"""Cheat on the static objective: honest_gfx950 with every MFMA done twice, the copy never stored.

The second accumulator is kept alive by a store whose mask is false for every element at run time (K is
never negative), so the result stays correct while the hot loop issues twice the matrix work. The static
objective (`estimated_tflops`, useful FLOPs over estimated time) must score it below honest_gfx950, and its
`useful_fraction` must show that half the issued matrix work is wasted.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.amd.cdna4 import mfma

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(1024, 1024, 1024), (256, 512, 128)]
SHAPE_MULTIPLE = (1, 1, 1)
KNOBS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4}


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr):
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 8], [num_warps, 1], [1, 0])
    acc_layout: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                                    warps_per_cta=[num_warps // 2, 2])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=8)
    b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=8)

    rows_a = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_layout))
    rows_b = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load_layout))
    cols_k = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load_layout))

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    copy = gl.full([BLOCK_M, BLOCK_N], 1.0, gl.float32, acc_layout)  # not acc: the compiler would merge the two
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + cols_k
        a_mask = (rows_a[:, None] < M) & (ks[None, :] < K)
        b_mask = (rows_b[:, None] < N) & (ks[None, :] < K)
        a = gl.load(a_ptr + rows_a[:, None] * K + ks[None, :], mask=a_mask, other=0.0)
        b = gl.load(b_ptr + rows_b[:, None] * K + ks[None, :], mask=b_mask, other=0.0)
        a_op = gl.convert_layout(a, a_layout)
        b_op = gl.convert_layout(gl.permute(b, [1, 0]), b_layout)
        acc = mfma(a_op, b_op, acc)
        copy = mfma(a_op, b_op, copy)

    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.float16), store_layout)
    rows_c = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
    cols_c = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_layout))
    c_mask = (rows_c[:, None] < M) & (cols_c[None, :] < N)
    gl.store(c_ptr + rows_c[:, None] * N + cols_c[None, :], out, mask=c_mask)
    never: gl.constexpr = gl.BlockedLayout([1, 8], [8, 8], [num_warps, 1], [1, 0])
    wasted = gl.convert_layout(copy.to(gl.float16), never)
    gl.store(c_ptr + rows_c[:, None] * N + cols_c[None, :], wasted, mask=c_mask & (K < 0))


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           num_warps: int):
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    return gemm_kernel[grid](a, b, c, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps=num_warps)
