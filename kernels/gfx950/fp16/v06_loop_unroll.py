"""v06 loop unroll: two K steps per iteration, constant buffer slots, alternating register sets.

What this stage adds (diff against v05)
---------------------------------------
v05 computes buffer slots at run time (`i % 2`) and ends each iteration with `a, b = a_next, b_next`, a
copy the register allocator has to resolve on the back edge. Unrolled by two, the even half multiplies
register set 0 while reading set 1 from buffer 1 and refilling buffer 0; the odd half swaps the roles.
All slot indices are constants and no operand copies are needed at the loop edge. The number of K steps
must be even: SHAPE_MULTIPLE K = 128.

Stock 3.6.0 cost. The seed reached 508 VGPRs / 4 spills here only with its scheduling plugin and
reports 241 spills with the stock scheduler. Here: the unrolled body holds two operand sets of 128 VGPRs
next to the 256 accumulator AGPRs, and the spills now reach the hot loop.

What to look for in the ISA
---------------------------
Two s_barrier, 32 direct-to-LDS copies, 64 ds_read_b128 and 256 MFMAs per iteration, and scratch
instructions inside the loop.

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
256 arch VGPRs + 256 AGPRs (.vgpr_count 512), .vgpr_spill_count 203, ScratchSize 668 bytes, 135,104
bytes LDS; 27 scratch instructions in the hot loop (166 in the kernel).
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v06"
TECHNIQUE = "loop unrolled x2: constant buffer slots, alternating register sets"

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (512, 768, 1024)]
SHAPE_MULTIPLE = (256, 256, 128)  # whole tiles, and an even number of K steps (x2 unrolled loop)
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_M": [128, 256], "BLOCK_N": [128, 256], "BLOCK_K": [64], "num_warps": [4, 8]}


@gluon.jit
def _tile_offsets(row0, stride, ROWS: gl.constexpr, BLOCK_K: gl.constexpr, LAYOUT: gl.constexpr):
    """Element offsets of a ROWS x BLOCK_K tile starting at row `row0`, as a [ROWS // 16, 16, BLOCK_K] tensor."""
    outer = gl.arange(0, ROWS // 16, gl.SliceLayout(1, gl.SliceLayout(2, LAYOUT)))
    inner = gl.arange(0, 16, gl.SliceLayout(0, gl.SliceLayout(2, LAYOUT)))
    offs_k = gl.arange(0, BLOCK_K, gl.SliceLayout(0, gl.SliceLayout(1, LAYOUT)))
    rows = row0 + outer[:, None, None] * 16 + inner[None, :, None]
    return rows * stride + offs_k[None, None, :]


@gluon.jit
def _copy_tiles(smem_a, smem_b, a_ptr, b_ptr, a_offs, b_offs):
    """Start the direct-to-LDS copies of one K step of A and B as one commit group."""
    gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_a, a_ptr, a_offs)
    gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_b, b_ptr, b_offs)
    gl.amd.cdna4.async_copy.commit_group()


@gluon.jit
def _read_tiles(smem_a, smem_b, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                MFMA: gl.constexpr):
    """Read one K step of A and B from LDS into the MFMA operand layouts.

    `load_shared_relaxed` tells the compiler that an explicit wait_group already ordered these reads after
    the copies that fill the buffer; a plain load makes LLVM wait for *every* outstanding LDS DMA
    (`s_waitcnt vmcnt(0)`), including the prefetch of the next step, which would undo the pipeline.
    """
    a = gl.amd.cdna4.async_copy.load_shared_relaxed(
        smem_a.reshape([BLOCK_M, BLOCK_K]), gl.DotOperandLayout(operand_index=0, parent=MFMA, k_width=8))
    b = gl.amd.cdna4.async_copy.load_shared_relaxed(
        smem_b.reshape([BLOCK_N, BLOCK_K]).permute([1, 0]), gl.DotOperandLayout(operand_index=1, parent=MFMA, k_width=8))
    return a, b


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD_A: gl.constexpr, LOAD_B: gl.constexpr, SMEM_A: gl.constexpr, SMEM_B: gl.constexpr,
                MFMA: gl.constexpr):
    pid = gl.program_id(0)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    # Two LDS buffers per operand; tiles are held as [rows // 16, 16, BLOCK_K] (see _operand_layouts).
    smem_a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [2, BLOCK_M // 16, 16, BLOCK_K], SMEM_A)
    smem_b = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [2, BLOCK_N // 16, 16, BLOCK_K], SMEM_B)

    a_offs = _tile_offsets(pid_m * BLOCK_M, stride_am, BLOCK_M, BLOCK_K, LOAD_A)
    b_offs = _tile_offsets(pid_n * BLOCK_N, stride_bn, BLOCK_N, BLOCK_K, LOAD_B)

    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, MFMA)
    num_k = K // BLOCK_K
    # Prologue: steps 0 and 1 in flight; step 0 read into register set 0.
    _copy_tiles(smem_a.index(0), smem_b.index(0), a_ptr, b_ptr, a_offs, b_offs)
    _copy_tiles(smem_a.index(1), smem_b.index(1), a_ptr + BLOCK_K, b_ptr + BLOCK_K, a_offs, b_offs)
    gl.amd.cdna4.async_copy.wait_group(1)
    a0, b0 = _read_tiles(smem_a.index(0), smem_b.index(0), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
    for i in range(0, num_k - 2, 2):
        # Even step i: MFMA on set 0, set 1 <- buffer 1 (step i+1), buffer 0 <- global (step i+2).
        gl.amd.cdna4.async_copy.wait_group(0)  # step i+1 landed; the barrier after it frees buffer 0
        _copy_tiles(smem_a.index(0), smem_b.index(0), a_ptr + (i + 2) * BLOCK_K, b_ptr + (i + 2) * BLOCK_K,
                    a_offs, b_offs)
        a1, b1 = _read_tiles(smem_a.index(1), smem_b.index(1), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
        acc = gl.amd.cdna4.mfma(a0, b0, acc)
        # Odd step i+1: the same with the roles of the buffers and register sets swapped.
        gl.amd.cdna4.async_copy.wait_group(0)
        _copy_tiles(smem_a.index(1), smem_b.index(1), a_ptr + (i + 3) * BLOCK_K, b_ptr + (i + 3) * BLOCK_K,
                    a_offs, b_offs)
        a0, b0 = _read_tiles(smem_a.index(0), smem_b.index(0), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
        acc = gl.amd.cdna4.mfma(a1, b1, acc)
    # Drain: set 0 holds step num_k-2; step num_k-1 (buffer 1) must land before its LDS reads.
    gl.amd.cdna4.async_copy.wait_group(0)
    a1, b1 = _read_tiles(smem_a.index(1), smem_b.index(1), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
    acc = gl.amd.cdna4.mfma(a0, b0, acc)
    acc = gl.amd.cdna4.mfma(a1, b1, acc)

    offs_cm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, MFMA))
    offs_cn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, gl.SliceLayout(0, MFMA))
    c_offs = offs_cm[:, None] * stride_cm + offs_cn[None, :]
    gl.amd.cdna4.buffer_store(acc.to(c_ptr.dtype.element_ty), c_ptr, c_offs)


def _log2(x: int) -> int:
    return x.bit_length() - 1


def _operand_layouts(rows: int, block_k: int, num_warps: int):
    """Load layout and padded LDS layout of one K-contiguous operand tile, viewed as [rows // 16, 16, BLOCK_K].

    The 16 lanes that feed one MFMA operand read 16 consecutive rows at the same K. In a plain row-major
    tile those rows are 128 bytes apart, so ds_read_b128 meets 4-way bank conflicts. Padding fixes that only
    if consecutive rows land in different padded blocks, while each direct-to-LDS instruction must still
    write one contiguous 1 KiB (64 lanes x 16 bytes, a single LDS base per wave). So the lanes of a load
    instruction take rows 16 apart (the outer index of the 3-D view), the waves and registers take the
    inner index, and the LDS order is K, lane rows, then inner rows: every 1 KiB block holds one
    instruction's write, and 32 bytes of padding after each block shift row r+1 by 32 bytes of banks
    against row r. A reshape of the LDS view gives back the [rows, BLOCK_K] tile for the MFMA reads.
    """
    k_lanes = block_k // 8                           # 16-byte vectors across K
    row_lanes = 64 // k_lanes
    assert rows // 16 >= row_lanes, "tile too small for the padded layout"
    load = gl.BlockedLayout([1, 1, 8], [row_lanes, 1, k_lanes], [1, num_warps, 1], [2, 0, 1])
    k_bits = [[0, 0, 1 << i] for i in range(_log2(block_k))]
    lane_rows = [[1 << i, 0, 0] for i in range(_log2(row_lanes))]
    inner_rows = [[0, 1 << i, 0] for i in range(4)]
    outer_rows = [[1 << i, 0, 0] for i in range(_log2(row_lanes), _log2(rows // 16))]
    # Positional: the third field (CTA bases, empty for one CTA) is `block_bases` to Triton 3.6, `cga_layout` from 3.7.
    smem = gl.PaddedSharedLayout([[512, 16]], k_bits + lane_rows + inner_rows + outer_rows, [],
                                 [rows // 16, 16, block_k])
    return load, smem


def _layouts(block_m: int, block_n: int, block_k: int, num_warps: int):
    """Load and LDS layouts of the A [BM, BK] and B [BN, BK] tiles, and the MFMA layout."""
    load_a, smem_a = _operand_layouts(block_m, block_k, num_warps)
    load_b, smem_b = _operand_layouts(block_n, block_k, num_warps)
    waves = [2, num_warps // 2]
    mfma = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True, warps_per_cta=waves)
    return load_a, load_b, smem_a, smem_b, mfma


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int = 256, BLOCK_N: int = 256,
           BLOCK_K: int = 64, num_warps: int = 4) -> None:
    """C = A @ B^T for A (M x K) and B (N x K), both K-contiguous; C is M x N row-major."""
    m, k = a.shape
    n = b.shape[0]
    assert m % BLOCK_M == 0 and n % BLOCK_N == 0 and k % (2 * BLOCK_K) == 0, "whole tiles, even K steps"
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load_a, load_b, smem_a, smem_b, mfma = _layouts(BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD_A=load_a, LOAD_B=load_b, SMEM_A=smem_a, SMEM_B=smem_b, MFMA=mfma, num_warps=num_warps)
