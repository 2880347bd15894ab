"""v09 beyond the hot loop: XCD-aware program ids and grouped tile order.

What this stage adds (diff against v08)
---------------------------------------
The loop is v08's; this stage changes which tile a program computes (`_tile_coords`):

1. XCD remap. MI350/MI355 have 8 XCDs with one L2 each, and the dispatcher hands program ids to them
   round-robin (program p runs on XCD p % 8). Without a remap, neighbouring tiles (which share A rows and
   B columns) run on different XCDs and each XCD's L2 fetches the same data again. The remap gives XCD x
   one contiguous range of logical tile ids.
2. Grouped order (GROUP_SIZE_M = 4). Logical ids walk four tile rows column by column, so the tiles that
   one XCD runs at about the same time share A rows and B columns.

`_tile_coords` uses plain integer arithmetic only, so `tile_order()` runs the very function the kernel
inlines in Python (through the JIT function's `.fn`), and tests check that every tile is visited once
and that each XCD gets a contiguous, grouped range. The published gain of this step is small in
MFMA-efficiency terms (98.7% vs 97.8%) and shows in TFLOPS (1421-1489 vs 1408); it cannot be measured here.

What to look for in the ISA
---------------------------
The same hot loop as v08; a few scalar ops (SALU) at the start for the remap.

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
num_warps=4: .vgpr_count 512 (256 arch + 256 AGPRs), .vgpr_spill_count 12, ScratchSize 52 bytes,
135,040 bytes LDS, 0 scratch instructions in the hot loop. num_warps=8: 256 VGPRs, 0 spills.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v09"
TECHNIQUE = "beyond the hot loop: XCD-aware program-id remap (8 XCDs) + grouped tile order"

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (512, 768, 1024)]
SHAPE_MULTIPLE = (256, 256, 128)  # whole tiles, and an even number of K steps (x2 unrolled loop)
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4, "GROUP_SIZE_M": 4}
NUM_XCDS = 8  # MI350/MI355: 256 CUs in 8 XCDs
KNOB_CHOICES = {"BLOCK_M": [256], "BLOCK_N": [256], "BLOCK_K": [64], "num_warps": [4, 8], "GROUP_SIZE_M": [1, 4, 8, 16]}


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
    """Start the direct-to-LDS copy of one operand piece as its own commit group."""
    gl.amd.cdna4.async_copy.buffer_load_to_shared(smem, ptr, offs)
    gl.amd.cdna4.async_copy.commit_group()


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
def _step(at_s, ab_s, bl_s, br_s, at_next, ab_next, bl_next, at_ptr, ab_ptr, bl_ptr, br_ptr, a_offs, b_offs,
          at, ab, bl, acc_tl, acc_bl, acc_tr, acc_br, COPY: gl.constexpr, MID_WAIT: gl.constexpr,
          HALF_M: gl.constexpr, HALF_N: gl.constexpr, BLOCK_K: gl.constexpr, MFMA: gl.constexpr):
    """One K step in four regions, one quadrant's MFMAs each, in two halves that each start with a wait.

    On entry `at`, `ab`, `bl` hold this step's top-A, bottom-A and left-B pieces (buffers *_s); on exit they
    hold the next step's (read from *_next). Each read comes after the last MFMA that uses the piece it
    replaces and at least one region before the first MFMA that needs it, so at most four pieces
    (4 x 32 VGPRs at 4 waves) are live next to the 256 accumulator registers. Each wait sits after a
    region's MFMAs, so the LDS reads the s_barrier after it must drain were issued a region earlier.
    With COPY, the pieces of the step two ahead stream into this step's buffers, each its own commit
    group, in the order the loop reads them (left B, top A | bottom A, right B), each right after the
    barrier that proves every wave is done with its buffer: the first wait's barrier follows the previous
    step's reads of left B, top A and bottom A, the second follows this step's read of right B.
    """
    acc_tl = gl.amd.cdna4.mfma(at, bl, acc_tl)
    gl.amd.cdna4.async_copy.wait_group(3)  # this step's br and the next step's bl landed
    br = _read_b(br_s, HALF_N, BLOCK_K, MFMA)
    if COPY:
        _copy_piece(bl_s, bl_ptr, b_offs)
        _copy_piece(at_s, at_ptr, a_offs)
    acc_bl = gl.amd.cdna4.mfma(ab, bl, acc_bl)
    bl = _read_b(bl_next, HALF_N, BLOCK_K, MFMA)  # this step's bl is dead once the bl quadrant issued
    acc_tr = gl.amd.cdna4.mfma(at, br, acc_tr)
    gl.amd.cdna4.async_copy.wait_group(MID_WAIT)  # the next step's at, ab landed; the barrier frees br_s
    at = _read_a(at_next, HALF_M, BLOCK_K, MFMA)
    if COPY:
        _copy_piece(ab_s, ab_ptr, a_offs)
        _copy_piece(br_s, br_ptr, b_offs)
    acc_br = gl.amd.cdna4.mfma(ab, br, acc_br)
    ab = _read_a(ab_next, HALF_M, BLOCK_K, MFMA)
    return acc_tl, acc_bl, acc_tr, acc_br, at, ab, bl


@gluon.jit
def _tile_coords(pid, num_pid_m, num_pid_n, GROUP_SIZE_M: gl.constexpr, NUM_XCDS: gl.constexpr):
    """Map a hardware program id to the (pid_m, pid_n) tile it computes.

    Plain integer arithmetic only, so `tile_order` runs the very same function in Python.

    1. XCD remap. The dispatcher hands program ids to the XCDs round-robin (pid p runs on XCD p % NUM_XCDS)
       and each XCD has its own L2. Renumber so that each XCD gets one contiguous range of logical ids:
       XCD x runs logical ids [start_x, start_x + count_x). When the grid does not divide evenly, the first
       `num_pids % NUM_XCDS` XCDs get one id more.
    2. Grouped order. Logical ids walk GROUP_SIZE_M tile rows column by column, so tiles that run close in
       time (on the same XCD) share A rows and B columns in that XCD's L2.
    """
    num_pids = num_pid_m * num_pid_n
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    per_xcd = num_pids // NUM_XCDS
    tall = num_pids % NUM_XCDS  # XCDs that run per_xcd + 1 programs
    if xcd < tall:
        logical = xcd * (per_xcd + 1) + local
    else:
        logical = tall * (per_xcd + 1) + (xcd - tall) * per_xcd + local
    group_width = GROUP_SIZE_M * num_pid_n
    first_m = (logical // group_width) * GROUP_SIZE_M
    group_m = num_pid_m - first_m
    group_m = min(group_m, GROUP_SIZE_M)
    pid_m = first_m + (logical % group_width) % group_m
    pid_n = (logical % group_width) // group_m
    return pid_m, pid_n


def tile_order(num_pid_m: int, num_pid_n: int, group: int, xcds: int) -> list[tuple[int, int]]:
    """(pid_m, pid_n) for every hardware program id, computed by the kernel's own `_tile_coords`."""
    return [tuple(_tile_coords.fn(pid, num_pid_m, num_pid_n, group, xcds)) for pid in range(num_pid_m * num_pid_n)]


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                LOAD_A: gl.constexpr, LOAD_B: gl.constexpr, SMEM_A: gl.constexpr, SMEM_B: gl.constexpr,
                MFMA: gl.constexpr, GROUP_SIZE_M: gl.constexpr, NUM_XCDS: gl.constexpr):
    pid_m, pid_n = _tile_coords(gl.program_id(0), gl.cdiv(M, BLOCK_M), gl.cdiv(N, BLOCK_N), GROUP_SIZE_M, NUM_XCDS)
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
    # Prologue: steps 0 and 1 in flight, one commit group per piece in the order the loop reads them
    # (bl, at, ab, br); step 0's at, ab, bl read once their groups landed.
    for s in gl.static_range(2):
        _copy_piece(smem_bl.index(s), b_ptr + s * BLOCK_K, b_offs)
        _copy_piece(smem_at.index(s), a_ptr + s * BLOCK_K, a_offs)
        _copy_piece(smem_ab.index(s), ab_ptr + s * BLOCK_K, a_offs)
        _copy_piece(smem_br.index(s), br_ptr + s * BLOCK_K, b_offs)
    gl.amd.cdna4.async_copy.wait_group(5)
    at = _read_a(smem_at.index(0), HALF_M, BLOCK_K, MFMA)
    ab = _read_a(smem_ab.index(0), HALF_M, BLOCK_K, MFMA)
    bl = _read_b(smem_bl.index(0), HALF_N, BLOCK_K, MFMA)
    for i in range(0, num_k - 2, 2):
        # Unrolled x2 as in v06: even step on buffer 0, odd step on buffer 1, each copying the step two ahead.
        k2 = (i + 2) * BLOCK_K
        k3 = (i + 3) * BLOCK_K
        acc_tl, acc_bl, acc_tr, acc_br, at, ab, bl = _step(
            smem_at.index(0), smem_ab.index(0), smem_bl.index(0), smem_br.index(0),
            smem_at.index(1), smem_ab.index(1), smem_bl.index(1), a_ptr + k2, ab_ptr + k2, b_ptr + k2, br_ptr + k2,
            a_offs, b_offs, at, ab, bl, acc_tl, acc_bl, acc_tr, acc_br, True, 3, HALF_M, HALF_N, BLOCK_K, MFMA)
        acc_tl, acc_bl, acc_tr, acc_br, at, ab, bl = _step(
            smem_at.index(1), smem_ab.index(1), smem_bl.index(1), smem_br.index(1),
            smem_at.index(0), smem_ab.index(0), smem_bl.index(0), a_ptr + k3, ab_ptr + k3, b_ptr + k3, br_ptr + k3,
            a_offs, b_offs, at, ab, bl, acc_tl, acc_bl, acc_tr, acc_br, True, 3, HALF_M, HALF_N, BLOCK_K, MFMA)
    # Drain: step num_k-2 (buffer 0) with no copies behind it (only the last br may still be in flight at
    # its second wait), then step num_k-1 (buffer 1), whose right B needs the last wait.
    acc_tl, acc_bl, acc_tr, acc_br, at, ab, bl = _step(
        smem_at.index(0), smem_ab.index(0), smem_bl.index(0), smem_br.index(0),
        smem_at.index(1), smem_ab.index(1), smem_bl.index(1), a_ptr, ab_ptr, b_ptr, br_ptr,
        a_offs, b_offs, at, ab, bl, acc_tl, acc_bl, acc_tr, acc_br, False, 1, HALF_M, HALF_N, BLOCK_K, MFMA)
    acc_tl = gl.amd.cdna4.mfma(at, bl, acc_tl)
    gl.amd.cdna4.async_copy.wait_group(0)  # the last step's br: a missing wait here would race
    br = _read_b(smem_br.index(1), HALF_N, BLOCK_K, MFMA)
    acc_bl = gl.amd.cdna4.mfma(ab, bl, acc_bl)
    acc_tr = gl.amd.cdna4.mfma(at, br, acc_tr)
    acc_br = gl.amd.cdna4.mfma(ab, br, acc_br)

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
    # Positional: the third field (CTA bases, empty for one CTA) is `block_bases` to Triton 3.6, `cga_layout` from 3.7.
    smem = gl.PaddedSharedLayout([[512, 16]], k_bits + lane_rows + inner_rows + outer_rows, [],
                                 [rows // 16, 16, block_k])
    return load, smem


def _layouts(block_m: int, block_n: int, block_k: int, num_warps: int):
    """Load and LDS layouts of an A half [BM / 2, BK] and a B half [BN / 2, BK], and the MFMA layout."""
    load_a, smem_a = _operand_layouts(block_m // 2, block_k, num_warps)
    load_b, smem_b = _operand_layouts(block_n // 2, block_k, num_warps)
    waves = [2, num_warps // 2]
    mfma = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True, warps_per_cta=waves)
    return load_a, load_b, smem_a, smem_b, mfma


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int = 256, BLOCK_N: int = 256,
           BLOCK_K: int = 64, num_warps: int = 4, GROUP_SIZE_M: int = 4) -> None:
    """C = A @ B^T for A (M x K) and B (N x K), both K-contiguous; C is M x N row-major."""
    m, k = a.shape
    n = b.shape[0]
    assert m % BLOCK_M == 0 and n % BLOCK_N == 0 and k % (2 * BLOCK_K) == 0, "whole tiles, even K steps"
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load_a, load_b, smem_a, smem_b, mfma = _layouts(BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD_A=load_a, LOAD_B=load_b, SMEM_A=smem_a, SMEM_B=smem_b, MFMA=mfma,
                      GROUP_SIZE_M=GROUP_SIZE_M, NUM_XCDS=NUM_XCDS, num_warps=num_warps)
