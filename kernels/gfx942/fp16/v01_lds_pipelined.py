"""v01 LDS pipelined (gfx942): whole-tile buffer loads prefetched into registers, operands staged in LDS.

What this stage adds (diff against v00)
---------------------------------------
CDNA3 has no direct global-to-LDS copy in Gluon (gfx950's `async_copy` is CDNA4), so the pipeline runs
through registers, the way Triton's own AMD stream pipeliner does it:

* Buffer loads (`gl.amd.cdna3.buffer_load`: one scalar base pointer plus 32-bit offsets) replace the
  masked pointer loads; the kernel handles whole tiles only, so there are no masks, compares or branches.
* Each K step's tiles are written to LDS once (`smem.store`) in a swizzled layout and read back in the
  MFMA operand layout (`smem.load`), replacing v00's per-step `convert_layout` round trips.
* The loads of step i+1 are issued *before* step i is read from LDS and multiplied, so global latency
  hides behind a whole step of MFMAs; the registers they land in are written to LDS at the top of the
  next iteration. The compiler places the barriers LDS needs (after the writes, before the next writes).
* Back to 4 waves: without v00's masks the 256x256 fp32 accumulator (256 AGPRs per lane) fits beside the
  operands with no spills.

What to look for in the ISA
---------------------------
`buffer_load_dwordx4` issued before the 128 `v_mfma_f32_16x16x16_f16` of the same iteration, `s_waitcnt
vmcnt` only at the top of the loop (before the LDS writes), `ds_write2st64_b64` + `s_barrier` +
`ds_read2st64_b64`, and no `s_cbranch` inside the hot loop besides the loop branch.

Observed (stock Triton 3.6.0, compiled for gfx942 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
256 arch VGPRs + 256 AGPRs (the whole file), 0 spills, 32 KiB LDS, 1 wave per SIMD, 128 MFMAs and 8
buffer loads per K step, one branch in the hot loop; static estimate 68% (v00: 17%). BLOCK_K = 64 at the 256 x 256
tile doubles the prefetched operands and spills, also in the hot loop, at 4 or 8 waves (and fills all 64 KiB of
LDS); with a 128-wide tile side it does not.
Not yet run on an MI300-series GPU: these figures are compile-only.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v01"
TECHNIQUE = "LDS pipelined: buffer loads prefetched one K step ahead, operands staged in swizzled LDS"

TARGET = "gfx942"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (512, 768, 1024)]
# Whole tiles only (no masks) for every tile size in KNOB_CHOICES: K a multiple of BLOCK_K = 64 as well as 32.
SHAPE_MULTIPLE = (256, 256, 64)
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 32, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_M": [128, 256], "BLOCK_N": [128, 256], "BLOCK_K": [32, 64], "num_warps": [4, 8]}


@gluon.jit
def _load_tile(ptr, offs):
    """One K step of an operand into registers (buffer_load: scalar base + 32-bit offsets, no mask)."""
    return gl.amd.cdna3.buffer_load(ptr, offs)


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD: gl.constexpr, SMEM: gl.constexpr, MFMA: gl.constexpr):
    pid = gl.program_id(0)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    dot_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MFMA, k_width=4)
    dot_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MFMA, k_width=4)
    smem_a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [BLOCK_M, BLOCK_K], SMEM)
    smem_b = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [BLOCK_N, BLOCK_K], SMEM)

    # Both operands are K-contiguous [rows, BLOCK_K] tiles read with the same layout.
    offs_k = gl.arange(0, BLOCK_K, gl.SliceLayout(0, LOAD))
    rows_a = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, LOAD))
    rows_b = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(1, LOAD))
    a_offs = rows_a[:, None] * stride_am + offs_k[None, :]
    b_offs = rows_b[:, None] * stride_bn + offs_k[None, :]

    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, MFMA)
    num_k = K // BLOCK_K
    a_next = _load_tile(a_ptr, a_offs)   # prologue: step 0 in flight
    b_next = _load_tile(b_ptr, b_offs)
    for i in range(num_k - 1):
        smem_a.store(a_next)
        smem_b.store(b_next)
        # Step i+1 streams into registers while step i is read from LDS and multiplied.
        a_next = _load_tile(a_ptr + (i + 1) * BLOCK_K, a_offs)
        b_next = _load_tile(b_ptr + (i + 1) * BLOCK_K, b_offs)
        a = smem_a.load(dot_a)
        b = smem_b.permute([1, 0]).load(dot_b)
        acc = gl.amd.cdna3.mfma(a, b, acc)
    smem_a.store(a_next)
    smem_b.store(b_next)
    acc = gl.amd.cdna3.mfma(smem_a.load(dot_a), smem_b.permute([1, 0]).load(dot_b), acc)

    offs_cm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, MFMA))
    offs_cn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, MFMA))
    c_offs = offs_cm[:, None] * stride_cm + offs_cn[None, :]
    gl.amd.cdna3.buffer_store(acc.to(c_ptr.dtype.element_ty), c_ptr, c_offs)


def _layouts(block_k: int, num_warps: int):
    """Load layout of a K-contiguous tile, its swizzled LDS layout, and the MFMA layout.

    A row of the tile is BLOCK_K fp16; the MFMA operand reads take four consecutive K values (k_width=4)
    from 16 consecutive rows. The swizzle XORs the 4-element column group with the row (two rows share a
    128-byte bank line at BLOCK_K=32), so those 16 rows fall in different banks.
    """
    k_lanes = block_k // 8                           # 16-byte vectors across K
    load = gl.BlockedLayout([1, 8], [64 // k_lanes, k_lanes], [num_warps, 1], [1, 0])
    per_phase = max(1, 128 // (block_k * 2))
    smem = gl.SwizzledSharedLayout(vec=4, per_phase=per_phase, max_phase=8, order=[1, 0])
    waves = [2, num_warps // 2]
    mfma = gl.amd.AMDMFMALayout(version=3, instr_shape=[16, 16, 16], transposed=True, warps_per_cta=waves)
    return load, smem, mfma


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int = 256, BLOCK_N: int = 256,
           BLOCK_K: int = 32, num_warps: int = 4) -> None:
    """C = A @ B^T for A (M x K) and B (N x K), both K-contiguous; C is M x N row-major."""
    m, k = a.shape
    n = b.shape[0]
    assert m % BLOCK_M == 0 and n % BLOCK_N == 0 and k % BLOCK_K == 0, "v01 handles whole tiles only"
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load, smem, mfma = _layouts(BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD=load, SMEM=smem, MFMA=mfma, num_warps=num_warps)
