"""A small sm90 kernel for the evaluator's tests: one warpgroup, wgmma from shared memory."""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(512, 512, 256), (128, 128, 64)]
SHAPE_MULTIPLE = (64, 64, 64)
KNOBS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4}


@gluon.jit
def small_wgmma(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr):
    load: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load))
    cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load))
    ks = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load))
    a_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, BLOCK_K], smem)
    b_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, BLOCK_K], smem)
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mma)
    for k in range(0, K, BLOCK_K):
        a_smem.store(gl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :] * stride_ak))
        b_smem.store(gl.load(b_ptr + cols[:, None] * stride_bn + (k + ks)[None, :] * stride_bk))
        hopper.fence_async_shared()
        acc = hopper.warpgroup_mma(a_smem, b_smem.permute((1, 0)), acc)
    out_rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    out_cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    gl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn, acc.to(gl.bfloat16))


def launch(a, b, c, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4):
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    small_wgmma[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=num_warps)
