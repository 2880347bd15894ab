"""
A scaled, optionally rectified GEMM on gfx950 with a host wrapper that takes plain Python values
=================================================================================================

`matmul(a, b, alpha=1.0, relu=False, tiles=(64, 64, 32), out="fp16")`: a float that reaches the kernel as a
runtime scalar, a bool and a tuple that become compile-time constants, a string that picks the output dtype,
and an `assert` of the wrapper's own on the tile size.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

OUT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@gluon.jit
def scaled_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm, alpha,
                       BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, RELU: gl.constexpr):
    load: gl.constexpr = gl.BlockedLayout([1, 8], [16, 4], [4, 1], [1, 0])
    mfma: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                              warps_per_cta=[2, 2])
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load))
    cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load))
    ks = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load))
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mfma)
    for k in range(0, K, BLOCK_K):
        a = gl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :])
        b = gl.load(b_ptr + cols[:, None] * stride_bn + (k + ks)[None, :])
        acc = gl.amd.cdna4.mfma(gl.convert_layout(a, gl.DotOperandLayout(0, mfma, 8)),
                                gl.convert_layout(gl.permute(b, (1, 0)), gl.DotOperandLayout(1, mfma, 8)), acc)
    acc = acc * alpha
    if RELU:
        acc = gl.maximum(acc, 0.0)
    out_rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mfma))
    out_cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mfma))
    gl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :], acc.to(c_ptr.dtype.element_ty))


def matmul(a, b, alpha: float = 1.0, relu: bool = False, tiles: tuple = (64, 64, 32), out: str = "fp16"):
    """C = alpha * A @ B^T (then max(C, 0) when `relu`), B given N x K."""
    block_m, block_n, block_k = tiles
    M, K = a.shape
    N = b.shape[0]
    assert K % block_k == 0, f"K={K} must be a multiple of BLOCK_K={block_k}"
    c = torch.empty((M, N), device=a.device, dtype=OUT_DTYPES[out])
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    scaled_gemm_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), alpha,
                             BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, RELU=relu, num_warps=4)
    return c
