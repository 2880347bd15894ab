# ruff: noqa: N999  (stage file names follow the seed ladder: sliceN, sliceMN)
"""v07 slice N: B in two 128-wide halves, one accumulator per half.

What this stage adds (diff against v06)
---------------------------------------
The output tile is split into a left and a right half (acc_l, acc_r, 256 x 128 each). B gets two LDS
allocations (left and right half, two buffers each) that share one offsets tensor: the right half only
moves the scalar base pointer (`br_ptr = b_ptr + 128 * stride_bn`), so it costs no VGPRs. Each K step
runs in two regions, and each region's LDS reads overlap the other half's MFMAs:

    region 0: acc_l += a*bl   read br (this step), bl (next step)   copy A, left B (step+2)
    region 1: acc_r += a*br   read a (next step)                    copy right B (step+2)

v06 reads the whole next operand set (A and B, 128 VGPRs at 4 waves) while the current one is live; here,
in program order, the next A (64 VGPRs) is read only after the last use of the current one and at most
three B halves (32 each) are live, which bounds the operand registers by construction (the seed: ~448 of
512 with the 256 accumulator registers). Two commit groups per step
(A + left B, right B): region 0 waits until one group is outstanding, and the s_barrier the compiler
places after each wait orders the reads after every wave's copies and each copy after the last read of
the buffer it overwrites. The x2 unroll of v06 stays: even steps use buffer 0, odd steps buffer 1.

Stock 3.6.0 cost. The seed reads the next A *and* left B in region 1; compiled that way with stock
Triton 3.6.0 this file spilled 10 VGPRs and reloaded 8 of them inside the hot loop (each reload followed
by `s_waitcnt vmcnt(0)`, which also waits for the in-flight LDS copies). The reloaded values were LDS
addresses: the B buffers start above 64 KiB (the two padded A buffers take 67,584 bytes), past the 16-bit
offset field of ds_read_b128, so the 32 B reads per iteration use ~30 loop-invariant address VGPRs
instead of a few bases with immediate offsets (the A reads use two). Reading the next left B one region
earlier (this step's `bl` is dead once the left MFMAs issued) compiles with no spill at all; the seed's 8
spills outside the loop needed its scheduling plugin.

What to look for in the ISA / IR
--------------------------------
Three LDS allocations (A, B left, B right), two accumulator tensors in the TTGIR, two buffer_store groups
in the epilogue (the right half at `c_ptr + 128`); per loop iteration 256 MFMAs, 64 ds_read_b128, 32
direct-to-LDS copies, four s_barrier (waits `vmcnt(4)` in region 0, `vmcnt(16)` in region 1) and no
scratch access.

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
256 arch VGPRs + 256 AGPRs (.vgpr_count 512), .vgpr_spill_count 0, ScratchSize 0, 135,072 bytes LDS;
0 scratch instructions in the hot loop; 536 v_accvgpr moves remain in the loop (accumulator shuffling
the seed's register-class plugin removes). num_warps=8: 3 spills, none in the hot loop; BLOCK_M=128:
no spills.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v07"
TECHNIQUE = "slice N: B in two halves, two accumulators, MFMA and LDS reads interleaved per half"

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (512, 768, 1024)]
SHAPE_MULTIPLE = (256, 256, 128)  # whole tiles, and an even number of K steps (x2 unrolled loop)
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_M": [128, 256], "BLOCK_N": [256], "BLOCK_K": [64], "num_warps": [4, 8]}


@gluon.jit
def _tile_offsets(row0, stride, ROWS: gl.constexpr, BLOCK_K: gl.constexpr, LAYOUT: gl.constexpr):
    """Element offsets of a ROWS x BLOCK_K tile starting at row `row0`, as a [ROWS // 16, 16, BLOCK_K] tensor."""
    outer = gl.arange(0, ROWS // 16, gl.SliceLayout(1, gl.SliceLayout(2, LAYOUT)))
    inner = gl.arange(0, 16, gl.SliceLayout(0, gl.SliceLayout(2, LAYOUT)))
    offs_k = gl.arange(0, BLOCK_K, gl.SliceLayout(0, gl.SliceLayout(1, LAYOUT)))
    rows = row0 + outer[:, None, None] * 16 + inner[None, :, None]
    return rows * stride + offs_k[None, None, :]


@gluon.jit
def _copy_piece(smem, ptr, offs):
    """Start the direct-to-LDS copy of one operand piece."""
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
def _step(a_s, bl_s, br_s, a_next, bl_next, a_ptr, bl_ptr, br_ptr, a_offs, b_offs, a, bl, acc_l, acc_r,
          COPY: gl.constexpr, BLOCK_M: gl.constexpr, HALF_N: gl.constexpr, BLOCK_K: gl.constexpr,
          MFMA: gl.constexpr):
    """One K step in two regions: the left half's MFMAs, then the right half's.

    On entry `a`, `bl` hold this step's A and left-B pieces (buffers a_s, bl_s); on exit they hold the next
    step's (read from a_next, bl_next). Region 0 reads this step's right B and the next step's left B (this
    step's `bl` is dead once the left MFMAs issued); region 1 reads the next A after the last use of this
    step's `a`. Never two full operand sets are live next to the accumulators, as in v06. With COPY, the step two ahead streams into this step's buffers in two commit
    groups: A and left B in region 0 (both last read during the previous step), right B in region 1 (read
    in region 0). The s_barrier the compiler places after each wait_group makes every wave's copies
    visible before the reads, and proves every wave is done with the buffer the following copy overwrites.
    """
    acc_l = gl.amd.cdna4.mfma(a, bl, acc_l)
    gl.amd.cdna4.async_copy.wait_group(1)  # this step's right B and the next step's A + left B landed
    br = _read_b(br_s, HALF_N, BLOCK_K, MFMA)
    bl = _read_b(bl_next, HALF_N, BLOCK_K, MFMA)
    if COPY:
        _copy_piece(a_s, a_ptr, a_offs)
        _copy_piece(bl_s, bl_ptr, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    acc_r = gl.amd.cdna4.mfma(a, br, acc_r)
    if COPY:
        gl.amd.cdna4.async_copy.wait_group(2)  # no data needed: its barrier frees br_s for the copy below
    a = _read_a(a_next, BLOCK_M, BLOCK_K, MFMA)
    if COPY:
        _copy_piece(br_s, br_ptr, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    return acc_l, acc_r, a, bl


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD_A: gl.constexpr, LOAD_B: gl.constexpr, SMEM_A: gl.constexpr, SMEM_B: gl.constexpr,
                MFMA: gl.constexpr):
    pid = gl.program_id(0)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    HALF_N: gl.constexpr = BLOCK_N // 2

    # B in two 128-wide halves, each with its own two LDS buffers and its own accumulator.
    smem_a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [2, BLOCK_M // 16, 16, BLOCK_K], SMEM_A)
    smem_bl = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [2, HALF_N // 16, 16, BLOCK_K], SMEM_B)
    smem_br = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [2, HALF_N // 16, 16, BLOCK_K], SMEM_B)

    a_offs = _tile_offsets(pid_m * BLOCK_M, stride_am, BLOCK_M, BLOCK_K, LOAD_A)
    b_offs = _tile_offsets(pid_n * BLOCK_N, stride_bn, HALF_N, BLOCK_K, LOAD_B)
    br_ptr = b_ptr + HALF_N * stride_bn  # the right half shares the offsets: only the scalar base moves

    acc_l = gl.zeros((BLOCK_M, HALF_N), gl.float32, MFMA)
    acc_r = gl.zeros((BLOCK_M, HALF_N), gl.float32, MFMA)
    num_k = K // BLOCK_K
    # Prologue: steps 0 and 1 in flight as commit groups (A + left B, right B) per step; step 0's A and
    # left B read once their group landed (the three younger groups stay in flight).
    for s in gl.static_range(2):
        _copy_piece(smem_a.index(s), a_ptr + s * BLOCK_K, a_offs)
        _copy_piece(smem_bl.index(s), b_ptr + s * BLOCK_K, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
        _copy_piece(smem_br.index(s), br_ptr + s * BLOCK_K, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    gl.amd.cdna4.async_copy.wait_group(3)
    a = _read_a(smem_a.index(0), BLOCK_M, BLOCK_K, MFMA)
    bl = _read_b(smem_bl.index(0), HALF_N, BLOCK_K, MFMA)
    for i in range(0, num_k - 2, 2):
        # Unrolled x2 as in v06: even step on buffer 0, odd step on buffer 1, each copying the step two ahead.
        k2 = (i + 2) * BLOCK_K
        k3 = (i + 3) * BLOCK_K
        acc_l, acc_r, a, bl = _step(
            smem_a.index(0), smem_bl.index(0), smem_br.index(0), smem_a.index(1), smem_bl.index(1),
            a_ptr + k2, b_ptr + k2, br_ptr + k2, a_offs, b_offs, a, bl, acc_l, acc_r,
            True, BLOCK_M, HALF_N, BLOCK_K, MFMA)
        acc_l, acc_r, a, bl = _step(
            smem_a.index(1), smem_bl.index(1), smem_br.index(1), smem_a.index(0), smem_bl.index(0),
            a_ptr + k3, b_ptr + k3, br_ptr + k3, a_offs, b_offs, a, bl, acc_l, acc_r,
            True, BLOCK_M, HALF_N, BLOCK_K, MFMA)
    # Drain: step num_k-2 (buffer 0) with no copies behind it, then step num_k-1 (buffer 1).
    acc_l, acc_r, a, bl = _step(
        smem_a.index(0), smem_bl.index(0), smem_br.index(0), smem_a.index(1), smem_bl.index(1),
        a_ptr, b_ptr, br_ptr, a_offs, b_offs, a, bl, acc_l, acc_r,
        False, BLOCK_M, HALF_N, BLOCK_K, MFMA)
    acc_l = gl.amd.cdna4.mfma(a, bl, acc_l)
    gl.amd.cdna4.async_copy.wait_group(0)  # the last step's right B: a missing wait here would race
    br = _read_b(smem_br.index(1), HALF_N, BLOCK_K, MFMA)
    acc_r = gl.amd.cdna4.mfma(a, br, acc_r)

    offs_cm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, MFMA))
    offs_cn = pid_n * BLOCK_N + gl.arange(0, HALF_N, gl.SliceLayout(0, MFMA))
    c_offs = offs_cm[:, None] * stride_cm + offs_cn[None, :]
    gl.amd.cdna4.buffer_store(acc_l.to(c_ptr.dtype.element_ty), c_ptr, c_offs)
    gl.amd.cdna4.buffer_store(acc_r.to(c_ptr.dtype.element_ty), c_ptr + HALF_N, c_offs)


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
    """Load and LDS layouts of the A [BM, BK] tile and a B half [BN / 2, BK], and the MFMA layout."""
    load_a, smem_a = _operand_layouts(block_m, block_k, num_warps)
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
