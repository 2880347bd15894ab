"""v02 async copy: operands go from global memory straight into LDS.

What this stage adds (diff against v01)
---------------------------------------
In v01 every operand made a round trip global -> VGPRs -> ds_write -> LDS -> ds_read -> VGPRs, because the
MFMA layout differs from the coalesced load layout. gfx950 can write a buffer load's result directly into
LDS (`buffer_load_dwordx4 ... lds`): `gl.amd.cdna4.async_copy.buffer_load_to_shared` issues those copies,
`commit_group` closes a group and `wait_group(n)` waits until at most n groups are in flight. The operands
then come out of LDS once, already in the MFMA operand layout (`smem.load(DotOperandLayout)`).

The hardware constraint shapes the layouts: one wave instruction writes 64 lanes x 16 bytes to one
contiguous 1 KiB of LDS (a single LDS base in M0 for the whole wave). With a row-major (unswizzled)
LDS tile and the blocked load layout of v00, eight whole 64-wide K rows form one instruction. B is now
stored N x K like A and read through a transposed view, `smem_b.permute([1, 0])`.

From here on the kernel handles whole tiles only (SHAPE_MULTIPLE = (256, 256, 64)): no masks, so the
hot loop carries no mask arithmetic, and rows stay 16-byte aligned as the direct copies require.

What to look for in the ISA
---------------------------
`buffer_load_dwordx4 vN, s[..], 0 offen lds` with `s_mov_b32 m0, ...` before it, no ds_write of operands,
ds_read_b128 for the MFMA operands, `s_waitcnt vmcnt(0)` + `s_barrier` before the reads, and an
`s_barrier` before the next step's copies overwrite the tile.

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
216 arch VGPRs + 256 AGPRs (.vgpr_count 472), 0 spills, 64 KiB LDS, 16 direct-to-LDS loads and
32 ds_read_b128 per K step, 0 ds_write. The seed reports ~100 fewer VGPRs at this step (358); with stock
3.6.0 the count *rises* by ~50, and the hot loop shows ~450 v_accvgpr_read/write/mov: the register
allocator shuffles accumulator values between AGPRs and VGPRs around the MFMAs, something the seed's
per-MFMA register-class control avoids and stock Triton cannot.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v02"
TECHNIQUE = "direct global-to-LDS async copies (buffer_load ... lds), commit/wait groups"

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (512, 768, 1024)]
SHAPE_MULTIPLE = (256, 256, 64)  # whole tiles only: no masks from here on
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_M": [128, 256], "BLOCK_N": [128, 256], "BLOCK_K": [32, 64], "num_warps": [4, 8]}


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD_A: gl.constexpr, LOAD_B: gl.constexpr, SMEM_A: gl.constexpr, SMEM_B: gl.constexpr,
                MFMA: gl.constexpr):
    pid = gl.program_id(0)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    dot_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MFMA, k_width=8)
    dot_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MFMA, k_width=8)

    smem_a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [BLOCK_M, BLOCK_K], SMEM_A)
    smem_b = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [BLOCK_N, BLOCK_K], SMEM_B)

    offs_am = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, LOAD_A))
    offs_ak = gl.arange(0, BLOCK_K, gl.SliceLayout(0, LOAD_A))
    offs_bn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, LOAD_B))
    offs_bk = gl.arange(0, BLOCK_K, gl.SliceLayout(0, LOAD_B))
    a_offs = offs_am[:, None] * stride_am + offs_ak[None, :]
    b_offs = offs_bn[:, None] * stride_bn + offs_bk[None, :]

    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, MFMA)
    for k0 in range(0, K, BLOCK_K):
        gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_a, a_ptr + k0, a_offs)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_b, b_ptr + k0, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.wait_group(0)
        a = smem_a.load(dot_a)
        b = smem_b.permute([1, 0]).load(dot_b)
        acc = gl.amd.cdna4.mfma(a, b, acc)

    offs_cm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, MFMA))
    offs_cn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, MFMA))
    c_offs = offs_cm[:, None] * stride_cm + offs_cn[None, :]
    gl.amd.cdna4.buffer_store(acc.to(c_ptr.dtype.element_ty), c_ptr, c_offs)


def _layouts(block_m: int, block_n: int, block_k: int, num_warps: int):
    """Load layouts of the A [BM, BK] and B [BN, BK] tiles (K contiguous), their LDS layouts, and the MFMA layout.

    A wave's direct-to-LDS copy writes 64 lanes x 16 bytes to one contiguous 1 KiB of LDS, so the load layout
    and the row-major (unswizzled) LDS layout must agree: eight whole 64-wide K rows per instruction. B is
    stored N x K like A and read through a transposed view ([BK, BN]) as the second MFMA operand.
    """
    k_lanes = block_k // 8                      # 16-byte vectors across K
    load_a = gl.BlockedLayout([1, 8], [64 // k_lanes, k_lanes], [num_warps, 1], [1, 0])
    load_b = load_a
    smem_a = gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0])
    smem_b = smem_a
    waves = [2, num_warps // 2]
    mfma = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True, warps_per_cta=waves)
    return load_a, load_b, smem_a, smem_b, mfma


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int = 256, BLOCK_N: int = 256,
           BLOCK_K: int = 64, num_warps: int = 4) -> None:
    """C = A @ B^T for A (M x K) and B (N x K), both K-contiguous; C is M x N row-major."""
    m, k = a.shape
    n = b.shape[0]
    assert m % BLOCK_M == 0 and n % BLOCK_N == 0 and k % BLOCK_K == 0, "v02+ handle whole tiles only"
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load_a, load_b, smem_a, smem_b, mfma = _layouts(BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD_A=load_a, LOAD_B=load_b, SMEM_A=smem_a, SMEM_B=smem_b, MFMA=mfma, num_warps=num_warps)
