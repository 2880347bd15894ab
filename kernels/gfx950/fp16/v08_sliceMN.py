"""v00 naive: explicit layouts, masked loads, one MFMA per K step.

The starting point of the gfx950 FP16 ladder. Every later stage changes one thing of this file.

What this stage shows
---------------------
Gluon makes every layout explicit. Each program computes a BLOCK_M x BLOCK_N tile of C = A @ B^T:

* A (M x K, K contiguous) and B (N x K, K contiguous) are read with plain pointer loads in a
  `BlockedLayout` chosen for coalescing: eight fp16 (16 bytes) per lane along K, eight lanes across a
  64-wide K slice, so a wave reads eight full 128-byte row segments per instruction. B is viewed as a
  BLOCK_K x BLOCK_N tile whose dimension 0 (K) is the contiguous one.
* `gl.convert_layout` turns the loaded tiles into the MFMA operand layouts (`DotOperandLayout`,
  k_width=8: each lane holds eight consecutive K values, the operand of one `v_mfma_f32_16x16x32_f16`).
  The compiler implements that conversion through LDS: ds_write of the tile, a barrier, ds_read.
* The accumulator lives in an `AMDMFMALayout` (version 4 = gfx950, instr_shape 16x16x32, 2x2 waves).
  With 256x256 per 4 waves it is 256 fp32 values per lane: the whole AGPR file.
* Every load is masked against M, N and K, so any shape works; the masks become per-lane compares and
  the address arithmetic is 64-bit, which is what v01 removes.

What to look for in the ISA
---------------------------
`global_load_dwordx4` for operands, `ds_write_b128` + `s_barrier` + `ds_read_b128` for the layout
conversion, `v_mfma_f32_16x16x32_f16`, many `s_cbranch_*` from masked-out-lane handling, and 64-bit
pointer adds (`v_lshl_add_u64`) per load.

Observed (stock Triton 3.6.0, compile-only for gfx950, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------
OBSERVED_V08
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v08"
TECHNIQUE = "slice M and N: four accumulator quadrants, copies and LDS reads spread over the loop"

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
def _copy(smem, ptr, offs):
    """Start the direct-to-LDS copy of one operand piece (joins the open commit group)."""
    gl.amd.cdna4.async_copy.buffer_load_to_shared(smem, ptr, offs)


@gluon.jit
def _read_a(smem, ROWS: gl.constexpr, BLOCK_K: gl.constexpr, MFMA: gl.constexpr):
    """Read an A piece [ROWS, BLOCK_K] from LDS into the first MFMA operand layout (ordered by wait_group)."""
    return gl.amd.cdna4.async_copy.load_shared_relaxed(
        smem.reshape([ROWS, BLOCK_K]), gl.DotOperandLayout(operand_index=0, parent=MFMA, k_width=8))


@gluon.jit
def _read_b(smem, COLS: gl.constexpr, BLOCK_K: gl.constexpr, MFMA: gl.constexpr):
    """Read a B piece, stored [COLS, BLOCK_K], as the second MFMA operand [BLOCK_K, COLS]."""
    return gl.amd.cdna4.async_copy.load_shared_relaxed(
        smem.reshape([COLS, BLOCK_K]).permute([1, 0]), gl.DotOperandLayout(operand_index=1, parent=MFMA, k_width=8))


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD_A: gl.constexpr, LOAD_B: gl.constexpr, SMEM_A: gl.constexpr, SMEM_B: gl.constexpr,
                MFMA: gl.constexpr):
    pid = gl.program_id(0)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    HALF_M: gl.constexpr = BLOCK_M // 2
    HALF_N: gl.constexpr = BLOCK_N // 2

    # A in top/bottom halves, B in left/right halves: four pieces, two LDS buffers each,
    # and four accumulator quadrants tl, bl, tr, br.
    dtype = a_ptr.dtype.element_ty
    smem_at = gl.allocate_shared_memory(dtype, [2, HALF_M // 16, 16, BLOCK_K], SMEM_A)
    smem_ab = gl.allocate_shared_memory(dtype, [2, HALF_M // 16, 16, BLOCK_K], SMEM_A)
    smem_bl = gl.allocate_shared_memory(dtype, [2, HALF_N // 16, 16, BLOCK_K], SMEM_B)
    smem_br = gl.allocate_shared_memory(dtype, [2, HALF_N // 16, 16, BLOCK_K], SMEM_B)

    a_offs = _tile_offsets(pid_m * BLOCK_M, stride_am, HALF_M, BLOCK_K, LOAD_A)
    b_offs = _tile_offsets(pid_n * BLOCK_N, stride_bn, HALF_N, BLOCK_K, LOAD_B)
    ab_ptr = a_ptr + HALF_M * stride_am  # second halves share the offsets: only the scalar base moves
    br_ptr = b_ptr + HALF_N * stride_bn

    acc_tl = gl.zeros((HALF_M, HALF_N), gl.float32, MFMA)
    acc_bl = gl.zeros((HALF_M, HALF_N), gl.float32, MFMA)
    acc_tr = gl.zeros((HALF_M, HALF_N), gl.float32, MFMA)
    acc_br = gl.zeros((HALF_M, HALF_N), gl.float32, MFMA)
    num_k = K // BLOCK_K
    # Prologue: steps 0 and 1 in flight (one commit group each); step 0 read into register set 0.
    for s in gl.static_range(2):
        _copy(smem_at.index(s), a_ptr + s * BLOCK_K, a_offs)
        _copy(smem_ab.index(s), ab_ptr + s * BLOCK_K, a_offs)
        _copy(smem_bl.index(s), b_ptr + s * BLOCK_K, b_offs)
        _copy(smem_br.index(s), br_ptr + s * BLOCK_K, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    gl.amd.cdna4.async_copy.wait_group(1)
    at0 = _read_a(smem_at.index(0), HALF_M, BLOCK_K, MFMA)
    ab0 = _read_a(smem_ab.index(0), HALF_M, BLOCK_K, MFMA)
    bl0 = _read_b(smem_bl.index(0), HALF_N, BLOCK_K, MFMA)
    br0 = _read_b(smem_br.index(0), HALF_N, BLOCK_K, MFMA)
    for i in range(0, num_k - 2, 2):
        # Even step i: MFMA on set 0, set 1 <- buffer 1 (step i+1), buffer 0 <- global (step i+2).
        # Four regions, one quadrant each; each region also reads one piece of the next step and starts
        # one piece's copy, so LDS reads and the 16 buffer loads spread over the MFMAs.
        gl.amd.cdna4.async_copy.wait_group(0)  # step i+1 landed (this wave's copies)...
        gl.thread_barrier()  # ...and every wave's; and every wave is done reading buffer 0
        k2 = (i + 2) * BLOCK_K
        acc_tl = gl.amd.cdna4.mfma(at0, bl0, acc_tl)
        at1 = _read_a(smem_at.index(1), HALF_M, BLOCK_K, MFMA)
        _copy(smem_at.index(0), a_ptr + k2, a_offs)
        acc_bl = gl.amd.cdna4.mfma(ab0, bl0, acc_bl)
        bl1 = _read_b(smem_bl.index(1), HALF_N, BLOCK_K, MFMA)
        _copy(smem_bl.index(0), b_ptr + k2, b_offs)
        acc_tr = gl.amd.cdna4.mfma(at0, br0, acc_tr)
        ab1 = _read_a(smem_ab.index(1), HALF_M, BLOCK_K, MFMA)
        _copy(smem_ab.index(0), ab_ptr + k2, a_offs)
        acc_br = gl.amd.cdna4.mfma(ab0, br0, acc_br)
        br1 = _read_b(smem_br.index(1), HALF_N, BLOCK_K, MFMA)
        _copy(smem_br.index(0), br_ptr + k2, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
        # Odd step i+1: the same with the roles of the buffers and register sets swapped.
        gl.amd.cdna4.async_copy.wait_group(0)
        gl.thread_barrier()
        k3 = (i + 3) * BLOCK_K
        acc_tl = gl.amd.cdna4.mfma(at1, bl1, acc_tl)
        at0 = _read_a(smem_at.index(0), HALF_M, BLOCK_K, MFMA)
        _copy(smem_at.index(1), a_ptr + k3, a_offs)
        acc_bl = gl.amd.cdna4.mfma(ab1, bl1, acc_bl)
        bl0 = _read_b(smem_bl.index(0), HALF_N, BLOCK_K, MFMA)
        _copy(smem_bl.index(1), b_ptr + k3, b_offs)
        acc_tr = gl.amd.cdna4.mfma(at1, br1, acc_tr)
        ab0 = _read_a(smem_ab.index(0), HALF_M, BLOCK_K, MFMA)
        _copy(smem_ab.index(1), ab_ptr + k3, a_offs)
        acc_br = gl.amd.cdna4.mfma(ab1, br1, acc_br)
        br0 = _read_b(smem_br.index(0), HALF_N, BLOCK_K, MFMA)
        _copy(smem_br.index(1), br_ptr + k3, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    # Drain: set 0 holds step num_k-2; step num_k-1 (buffer 1) must land before its LDS reads.
    gl.amd.cdna4.async_copy.wait_group(0)
    gl.thread_barrier()
    acc_tl = gl.amd.cdna4.mfma(at0, bl0, acc_tl)
    at1 = _read_a(smem_at.index(1), HALF_M, BLOCK_K, MFMA)
    acc_bl = gl.amd.cdna4.mfma(ab0, bl0, acc_bl)
    bl1 = _read_b(smem_bl.index(1), HALF_N, BLOCK_K, MFMA)
    acc_tr = gl.amd.cdna4.mfma(at0, br0, acc_tr)
    ab1 = _read_a(smem_ab.index(1), HALF_M, BLOCK_K, MFMA)
    acc_br = gl.amd.cdna4.mfma(ab0, br0, acc_br)
    br1 = _read_b(smem_br.index(1), HALF_N, BLOCK_K, MFMA)
    acc_tl = gl.amd.cdna4.mfma(at1, bl1, acc_tl)
    acc_bl = gl.amd.cdna4.mfma(ab1, bl1, acc_bl)
    acc_tr = gl.amd.cdna4.mfma(at1, br1, acc_tr)
    acc_br = gl.amd.cdna4.mfma(ab1, br1, acc_br)

    offs_cm = pid_m * BLOCK_M + gl.arange(0, HALF_M, gl.SliceLayout(1, MFMA))
    offs_cn = pid_n * BLOCK_N + gl.arange(0, HALF_N, gl.SliceLayout(0, MFMA))
    c_offs = offs_cm[:, None] * stride_cm + offs_cn[None, :]
    out = c_ptr.dtype.element_ty
    gl.amd.cdna4.buffer_store(acc_tl.to(out), c_ptr, c_offs)
    gl.amd.cdna4.buffer_store(acc_tr.to(out), c_ptr + HALF_N, c_offs)
    gl.amd.cdna4.buffer_store(acc_bl.to(out), c_ptr + HALF_M * stride_cm, c_offs)
    gl.amd.cdna4.buffer_store(acc_br.to(out), c_ptr + HALF_M * stride_cm + HALF_N, c_offs)


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
    smem = gl.PaddedSharedLayout(interval_padding_pairs=[[512, 16]],
                                 offset_bases=k_bits + lane_rows + inner_rows + outer_rows,
                                 block_bases=[], shape=[rows // 16, 16, block_k])
    return load, smem


def _layouts(block_m: int, block_n: int, block_k: int, num_warps: int):
    """Load and LDS layouts of an A half [BM / 2, BK] and a B half [BN / 2, BK], and the MFMA layout."""
    load_a, smem_a = _operand_layouts(block_m // 2, block_k, num_warps)
    load_b, smem_b = _operand_layouts(block_n // 2, block_k, num_warps)
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
