"""A small gfx950 kernel for the evaluator's tests: 64x64 tiles, one MFMA accumulator per wave."""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(512, 512, 256), (128, 128, 64)]
SHAPE_MULTIPLE = (64, 64, 32)
KNOBS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_K": [32, 64]}


@gluon.jit
def small_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr):
    load: gl.constexpr = gl.BlockedLayout([1, 8], [16, 4], [4, 1], [1, 0])
    mfma: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                              warps_per_cta=[2, 2])
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load))
    cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load))
    ks = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load))
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mfma)
    for k in range(0, K, BLOCK_K):
        a = gl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :] * stride_ak)
        b = gl.load(b_ptr + cols[:, None] * stride_bn + (k + ks)[None, :] * stride_bk)
        a = gl.convert_layout(a, gl.DotOperandLayout(0, mfma, 8))
        b = gl.convert_layout(gl.permute(b, (1, 0)), gl.DotOperandLayout(1, mfma, 8))
        acc = gl.amd.cdna4.mfma(a, b, acc)
    out_rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mfma))
    out_cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mfma))
    gl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn, acc.to(gl.float16))


def launch(a, b, c, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4):
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    small_gemm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                     BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=num_warps)
