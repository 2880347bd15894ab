"""A gfx950 tile product whose B copy into LDS reads K fastest (8 fp16 per lane along K): written for a B stored
K-contiguous, as `torch.randn(N, K).T` makes it. Given a row-major B, the direct-to-LDS copy has one element per
lane along K and does not compile; given a column-major one (`b=KxN:fp16:T`) it does."""
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def tile_product(a_ptr, b_ptr, c_ptr, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK: gl.constexpr, BLOCK_K: gl.constexpr):
    a_rows: gl.constexpr = gl.BlockedLayout([1, 8], [64 // (BLOCK_K // 8), BLOCK_K // 8], [4, 1], [1, 0])
    b_cols: gl.constexpr = gl.BlockedLayout([8, 1], [BLOCK_K // 8, 64 // (BLOCK_K // 8)], [1, 4], [0, 1])
    mfma: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                              warps_per_cta=[2, 2])
    flat_a: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
    flat_b: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0, 1])
    smem_a = gl.allocate_shared_memory(gl.float16, [BLOCK, BLOCK_K], flat_a)
    smem_b = gl.allocate_shared_memory(gl.float16, [BLOCK_K, BLOCK], flat_b)
    rows = gl.arange(0, BLOCK, gl.SliceLayout(1, a_rows))
    ks_a = gl.arange(0, BLOCK_K, gl.SliceLayout(0, a_rows))
    ks_b = gl.arange(0, BLOCK_K, gl.SliceLayout(1, b_cols))
    cols = gl.arange(0, BLOCK, gl.SliceLayout(0, b_cols))
    a_offsets = rows[:, None] * stride_am + ks_a[None, :] * stride_ak
    b_offsets = ks_b[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = gl.zeros((BLOCK, BLOCK), gl.float32, mfma)
    for k in range(0, gl.cdiv(K, BLOCK_K)):
        gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_a, a_ptr + k * BLOCK_K * stride_ak, a_offsets)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_b, b_ptr + k * BLOCK_K * stride_bk, b_offsets)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.wait_group(0)
        a = smem_a.load(gl.DotOperandLayout(operand_index=0, parent=mfma, k_width=8))
        b = smem_b.load(gl.DotOperandLayout(operand_index=1, parent=mfma, k_width=8))
        acc = gl.amd.cdna3.mfma(a, b, acc)
    out_rows = gl.arange(0, BLOCK, gl.SliceLayout(1, mfma))
    out_cols = gl.arange(0, BLOCK, gl.SliceLayout(0, mfma))
    gl.amd.cdna3.buffer_store(acc.to(gl.float16), c_ptr,
                              out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn)


def matmul(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    tile_product[(1,)](a, b, c, a.shape[1], a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                       c.stride(0), c.stride(1), BLOCK=128, BLOCK_K=64, num_warps=4)
    return c
