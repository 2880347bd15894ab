"""Cheat: the vendor GEMM reached through an alias the policy cannot resolve (`[torch][0].einsum`).

The policy knows `torch.einsum` by name, but not what a list element is; the provenance trace sees the
batched matrix multiply the einsum dispatches and gives `foreign_compute`.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(1024, 1024, 1024), (256, 512, 128)]
SHAPE_MULTIPLE = (1, 1, 1)
KNOBS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4}


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr):
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [num_warps, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[num_warps // 2, 2],
                                                         instr_shape=[16, 8])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=2)

    rows_a = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_layout))
    rows_b = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load_layout))
    cols_k = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load_layout))

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + cols_k
        a_mask = (rows_a[:, None] < M) & (ks[None, :] < K)
        b_mask = (rows_b[:, None] < N) & (ks[None, :] < K)
        a = gl.load(a_ptr + rows_a[:, None] * K + ks[None, :], mask=a_mask, other=0.0)
        b = gl.load(b_ptr + rows_b[:, None] * K + ks[None, :], mask=b_mask, other=0.0)
        acc = mma_v2(gl.convert_layout(a, a_layout), gl.convert_layout(gl.permute(b, [1, 0]), b_layout), acc)

    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.bfloat16), store_layout)
    rows_c = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
    cols_c = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_layout))
    c_mask = (rows_c[:, None] < M) & (cols_c[None, :] < N)
    gl.store(c_ptr + rows_c[:, None] * N + cols_c[None, :], out, mask=c_mask)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           num_warps: int):
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    kernel = gemm_kernel[grid](a, b, c, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps=num_warps)
    library = [torch][0]
    c.copy_(library.einsum("mk,nk->mn", a, b))
    return kernel
