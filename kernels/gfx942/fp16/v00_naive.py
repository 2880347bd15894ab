"""v00 naive (gfx942): explicit layouts, masked loads, one MFMA per K step, on CDNA3.

The starting point of the gfx942 FP16 ladder, the gfx950 ladder's v00 retargeted to MI300X/MI325X.

What this stage shows
---------------------
Each program computes a BLOCK_M x BLOCK_N tile of C = A @ B^T with A (M x K) and B (N x K), both
K-contiguous:

* A and B are read with masked pointer loads in a `BlockedLayout` chosen for coalescing: eight fp16
  (16 bytes) per lane along K.
* `gl.convert_layout` turns the tiles into the MFMA operand layouts. CDNA3's fp16 MFMA is
  `v_mfma_f32_16x16x16_f16`: each lane holds four consecutive K values of an operand (k_width=4), half of
  what gfx950's 16x16x32 takes. The compiler implements the conversion through LDS (ds_write, barrier,
  ds_read).
* The accumulator lives in an `AMDMFMALayout` of version 3 (gfx942), instr_shape 16x16x16, over 2x4
  waves: 128 fp32 values per lane. With 4 waves (256 per lane, the whole accumulation file) the masked
  address arithmetic spills (28 VGPRs at 256x256x32), so the naive stage runs 8 waves.
* Every load is masked against M, N and K, so any shape works.

What to look for in the ISA
---------------------------
`global_load_dwordx4` for the operands, ds_write + `s_barrier` + ds_read for the layout conversion, 64
`v_mfma_f32_16x16x16_f16` per 32-wide K step and wave, and the branches the masks cost.

Observed (stock Triton 3.6.0, compiled for gfx942 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
185 VGPRs (the accumulator stays in arch VGPRs at 8 waves), 0 spills, 16 KiB LDS (conversion scratch),
2 waves per SIMD, 64 MFMAs per K step, static estimate 17% (bound by waiting on this step's loads).
Not yet run on an MI300-series GPU: these figures are compile-only.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v00"
TECHNIQUE = "naive: blocked-layout masked loads, convert_layout to CDNA3 MFMA operands"

TARGET = "gfx942"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (1000, 1000, 1000)]
SHAPE_MULTIPLE = (1, 1, 1)  # masked loads and stores: any shape
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 8}
KNOB_CHOICES = {"BLOCK_M": [128, 256], "BLOCK_N": [128, 256], "BLOCK_K": [32, 64], "num_warps": [4, 8]}


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD_A: gl.constexpr, LOAD_B: gl.constexpr, MFMA: gl.constexpr):
    pid = gl.program_id(0)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    dot_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MFMA, k_width=4)
    dot_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MFMA, k_width=4)

    offs_am = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, LOAD_A))
    offs_ak = gl.arange(0, BLOCK_K, gl.SliceLayout(0, LOAD_A))
    offs_bk = gl.arange(0, BLOCK_K, gl.SliceLayout(1, LOAD_B))
    offs_bn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, LOAD_B))
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_ak[None, :]
    b_ptrs = b_ptr + offs_bk[:, None] + offs_bn[None, :] * stride_bn

    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, MFMA)
    for k0 in range(0, K, BLOCK_K):
        a_mask = (offs_am[:, None] < M) & (offs_ak[None, :] < K - k0)
        b_mask = (offs_bk[:, None] < K - k0) & (offs_bn[None, :] < N)
        a = gl.load(a_ptrs, mask=a_mask, other=0.0)
        b = gl.load(b_ptrs, mask=b_mask, other=0.0)
        acc = gl.amd.cdna3.mfma(gl.convert_layout(a, dot_a), gl.convert_layout(b, dot_b), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K

    offs_cm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, MFMA))
    offs_cn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, MFMA))
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    gl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :], acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def _layouts(block_m: int, block_n: int, block_k: int, num_warps: int):
    """Coalesced load layouts for A [BM, BK] and B [BK, BN] (K contiguous in both) and the MFMA layout."""
    k_lanes = block_k // 8                      # 16-byte vectors across K
    load_a = gl.BlockedLayout([1, 8], [64 // k_lanes, k_lanes], [num_warps, 1], [1, 0])
    load_b = gl.BlockedLayout([8, 1], [k_lanes, 64 // k_lanes], [1, num_warps], [0, 1])
    waves = [2, num_warps // 2]
    mfma = gl.amd.AMDMFMALayout(version=3, instr_shape=[16, 16, 16], transposed=True, warps_per_cta=waves)
    return load_a, load_b, mfma


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int = 256, BLOCK_N: int = 256,
           BLOCK_K: int = 32, num_warps: int = 8) -> None:
    """C = A @ B^T for A (M x K) and B (N x K), both K-contiguous; C is M x N row-major."""
    m, k = a.shape
    n = b.shape[0]
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load_a, load_b, mfma = _layouts(BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD_A=load_a, LOAD_B=load_b, MFMA=mfma, num_warps=num_warps)
