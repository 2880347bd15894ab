"""bf8 - e5m2 GEMM on the f8f6f4 MFMA, with the fp16 ladder's final structure.

What: C[M, N] = A[M, K] @ B[N, K]^T with A and B in fp8 e5m2 ("bf8"), fp32 accumulation, bf16 output.
Each program owns a 256x256 tile of C and walks K in steps of 128 with eight waves (2x4).

Why this shape of kernel: it carries the fp16 ladder's end state over to fp8:
- operands stream global -> LDS with `buffer_load_to_shared` (direct-to-LDS, no register round trip);
- LDS tiles are padded (128 bytes after every 1 KiB, see `lds_layout`) so that, by the layout's
  arithmetic, the 16 lanes of one `ds_read_b128` operand read cover all 64 banks once (not measured);
- two LDS buffers per operand piece and a software pipeline that keeps the next two K-steps in flight;
- the 256x256 accumulator is sliced into four 128x128 quadrants (top/bottom of A x left/right of B), and
  each quadrant's MFMAs overlap the LDS read of the operand the next quadrant needs, so only four operand
  slices are ever live;
- the loop is unrolled by two so every LDS buffer index is a compile-time constant (ds_read immediates);
- operand loads advance a scalar base pointer, so the per-lane offsets are computed once (2 VGPRs);
- program ids are remapped so each XCD works on a compact group of tiles (L2 locality).

Eight waves, not four: with four waves (2x2) each lane holds 256 fp32 accumulators, exactly the AGPR file.
Under Triton 3.6.0's LLVM that leaves no free accumulator registers. Compiled with num_warps=4 this file
needs 256 VGPRs + 256 AGPRs, spills 35 VGPRs, and its hot loop (two K-steps) carries 14 scratch accesses
and 284 `v_accvgpr_read/write/mov` copies shuttling accumulators through a[0:3] and VGPRs. Eight waves
(2x4, two per SIMD) halve the accumulators to 128 per lane; everything fits one 256-register budget (no
AGPRs, no copies, no spills), and the two waves of a SIMD overlap each other's LDS reads and waits with
MFMAs. (`num_warps` stays a knob.)

The MFMA: Gluon's plain `mfma` has no fp8 16x16x128 instruction on gfx950 ("no matching matrix core
intrinsic"); the f8f6f4 family is reached through `gl.amd.cdna4.mfma_scaled` with no scales, which emits
`v_mfma_scale_f32_16x16x128_f8f6f4` with both scale operands set to e8m0 127 (= 1.0). The operand formats
are the cbsz (A) and blgp (B) fields: 0 = fp8 e4m3, 1 = bf8 e5m2, 2 = fp6 e2m3, 3 = bf6 e3m2, 4 = fp4 e2m1;
the assembler prints `cbsz:1 blgp:1` for e5m2 x e5m2. One fp8 16x16x128 keeps the matrix unit busy
32 cycles (CDNA4 ISA guide): twice the FLOPs per cycle of the fp16 16x16x32 (a quarter of the work in
half the cycles).

What to look for in the ISA (`k.asm["amdgcn"]`, the loop marked "Inner Loop Header"): per trip (two
K-steps) 64 `v_mfma_scale_f32_16x16x128_f8f6f4 ... cbsz:1 blgp:1` (32 per wave per K-step: 4 quadrants x
4x2 tiles of 16x16), 48 `ds_read_b128`, 16 `buffer_load_dwordx4 ... lds`, 8 `s_waitcnt vmcnt(10)` (five
commit groups of two loads in flight) each followed by an `s_barrier`, and no `scratch_` instruction.

Observed at compile time (triton 3.6.0, gfx950, 4096x4096x16384, CPU compile, default knobs): 8 waves,
254 VGPRs, 0 AGPRs, 0 spills, 0 scratch, 146,944 bytes of LDS (4 pieces x 2 buffers x 16 KiB + padding),
occupancy 2 waves/SIMD; per wave per K-step 32 MFMAs x 32 cycles = 1,024 matrix cycles. Not run on a GPU:
the seed publishes 3232-3257 TFLOP/s (99.5-99.7% MFMA efficiency) for its BF8 kernel on an MI355X.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.amd.cdna4.async_copy import load_shared_relaxed as relaxed_load
from triton.runtime.jit import constexpr_function

STAGE = "bf8"
TECHNIQUE = "fp8 e5m2 on the 16x16x128 f8f6f4 MFMA; direct-to-LDS copies, padded LDS, 2-deep pipeline, MxN slices"
TARGET = "gfx950"
DTYPE = "float8_e5m2"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 16384), (4096, 4096, 4096), (8192, 8192, 8192)]
SHAPE_MULTIPLE = (256, 256, 256)  # whole tiles, and an even number of K-steps (the loop is unrolled by 2)
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 4, "NUM_XCDS": 8, "num_warps": 8}
KNOB_CHOICES = {"GROUP_M": [1, 4, 8], "NUM_XCDS": [1, 8], "num_warps": [4, 8]}

FORMAT = gl.constexpr("e5m2")  # the MFMA operand format of DTYPE


@constexpr_function
def lds_layout(rows, cols):
    """Padded LDS layout for a [rows, 128] byte tile, written by `copy_layout` and read by 16x16x128 MFMAs.

    LDS offset bits, low to high: 16 bytes of a row; rows 1, 2, 4; the 16-byte column chunks 16, 32, 64;
    then rows 8, 16, 32, ... So each 1 KiB chunk holds 8 consecutive rows column-chunk-major, which is the
    order one wave's async copy writes (contiguous, as direct-to-LDS needs), and 128 bytes of padding per
    chunk moves rows 8..15 to the other half of the 64 banks: the 16 lanes that read one column chunk of
    rows 0..15 with `ds_read_b128` then cover all 256 bank bytes exactly once. Costs 12.5% more LDS.
    """
    bases = [[0, 1], [0, 2], [0, 4], [0, 8], [1, 0], [2, 0], [4, 0]]
    bases += [[0, 1 << i] for i in range(4, cols.bit_length() - 1)]
    bases += [[1 << i, 0] for i in range(3, rows.bit_length() - 1)]
    # Positional: the third field (CTA bases, empty for one CTA) is `block_bases` to Triton 3.6, `cga_layout` from 3.7.
    return gl.PaddedSharedLayout([[1024, 128]], bases, [], [rows, cols])


@constexpr_function
def copy_layout(num_warps):
    """Register layout of the async copy: 16 bytes per lane, lanes down 8 rows then across 8 column chunks.

    A wave's 64 lanes thus cover 8 rows x 128 bytes, and in `lds_layout` those land as 1 KiB in lane
    order: one LDS base per wave with lanes at consecutive 16 bytes, which `buffer_load_to_shared` needs.
    Each row is still read as 128 contiguous global bytes (by lanes r, r+8, ..., r+56).
    """
    return gl.BlockedLayout([1, 16], [8, 8], [num_warps, 1], [0, 1])


@gluon.jit
def tile_coords(M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr,
                NUM_XCDS: gl.constexpr):
    """Map the program id to a C tile: XCD-contiguous renumbering, then GROUP_M-row grouped order.

    The hardware hands consecutive workgroups to the eight XCDs round-robin; renumbering makes the tiles
    one XCD runs consecutive, and grouping makes them share A rows and B columns in that XCD's L2.
    """
    pid = gl.program_id(0)
    tiles_m = M // BLOCK_M
    tiles_n = N // BLOCK_N
    total = tiles_m * tiles_n
    if NUM_XCDS > 1:
        per_xcd = total // NUM_XCDS
        extra = total % NUM_XCDS  # the first `extra` XCDs run one tile more
        xcd = pid % NUM_XCDS
        local = pid // NUM_XCDS
        pid = xcd * per_xcd + gl.minimum(xcd, extra) + local
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    rows = gl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % rows
    pid_n = (pid % group) // rows
    return pid_m, pid_n


@gluon.jit
def k_step(acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left,
           sa_top, sa_bot, sb_left, sb_right, a_next, b_next, a_offs, b_offs, a_half, b_half,
           BUF: gl.constexpr, PREFETCH: gl.constexpr, WAIT: gl.constexpr, LAST: gl.constexpr,
           a_dot: gl.constexpr, b_dot: gl.constexpr):
    """One K-step on LDS buffer BUF: four quadrant MFMAs, each overlapping one operand read and one copy.

    On entry a_top/b_left of this step are in registers; on exit those of the next step are (unless LAST).
    With PREFETCH, the piece just read out of buffer BUF is refilled with the step two ahead, whose top-left
    corner is at the scalar pointers a_next and b_next (the per-lane offsets never change: advancing a
    scalar base costs no VGPRs). WAIT is the number of copy groups allowed in flight at the first read;
    it drops by one per read once nothing new is issued.
    """
    acc_tl = gl.amd.cdna4.mfma_scaled(a_top, None, FORMAT, b_left, None, FORMAT, acc_tl)
    gl.amd.cdna4.async_copy.wait_group(WAIT)
    a_bot = relaxed_load(sa_bot.index(BUF), a_dot)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_top.index(BUF), a_next, a_offs)
        gl.amd.cdna4.async_copy.commit_group()

    acc_bl = gl.amd.cdna4.mfma_scaled(a_bot, None, FORMAT, b_left, None, FORMAT, acc_bl)
    gl.amd.cdna4.async_copy.wait_group(WAIT if PREFETCH else WAIT - 1)
    b_right = relaxed_load(sb_right.index(BUF).permute([1, 0]), b_dot)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_left.index(BUF), b_next, b_offs)
        gl.amd.cdna4.async_copy.commit_group()

    acc_tr = gl.amd.cdna4.mfma_scaled(a_top, None, FORMAT, b_right, None, FORMAT, acc_tr)
    if not LAST:
        gl.amd.cdna4.async_copy.wait_group(WAIT if PREFETCH else WAIT - 2)
        a_top = relaxed_load(sa_top.index(1 - BUF), a_dot)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_bot.index(BUF), a_next + a_half, a_offs)
        gl.amd.cdna4.async_copy.commit_group()

    acc_br = gl.amd.cdna4.mfma_scaled(a_bot, None, FORMAT, b_right, None, FORMAT, acc_br)
    if not LAST:
        gl.amd.cdna4.async_copy.wait_group(WAIT if PREFETCH else WAIT - 3)
        b_left = relaxed_load(sb_left.index(1 - BUF).permute([1, 0]), b_dot)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_right.index(BUF), b_next + b_half, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    return acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left


@gluon.jit
def store_quadrant(c_ptr, acc, row0, col0, N, acc_layout: gl.constexpr, HALF_M: gl.constexpr,
                   HALF_N: gl.constexpr):
    rows = row0 + gl.arange(0, HALF_M, gl.SliceLayout(1, acc_layout))
    cols = col0 + gl.arange(0, HALF_N, gl.SliceLayout(0, acc_layout))
    offs = rows[:, None] * N + cols[None, :]
    gl.amd.cdna4.buffer_store(acc.to(c_ptr.dtype.element_ty), c_ptr, offs)


@gluon.jit
def bf8_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                    GROUP_M: gl.constexpr, NUM_XCDS: gl.constexpr, num_warps: gl.constexpr):
    HALF_M: gl.constexpr = BLOCK_M // 2
    HALF_N: gl.constexpr = BLOCK_N // 2
    copy: gl.constexpr = copy_layout(num_warps)
    a_lds: gl.constexpr = lds_layout(HALF_M, BLOCK_K)
    b_lds: gl.constexpr = lds_layout(HALF_N, BLOCK_K)
    # transposed=True: each lane holds 4 consecutive columns of a C row, so the epilogue stores 8 bytes.
    acc_layout: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 128], transposed=True,
                                                    warps_per_cta=[2, num_warps // 2])
    # k_width 32: each lane feeds the 16x16x128 MFMA 32 consecutive K bytes (two ds_read_b128).
    a_dot: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=32)
    b_dot: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=32)

    pid_m, pid_n = tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M, NUM_XCDS)
    # Buffer ops address with a scalar base and 32-bit offsets: fold the tile origin into the base.
    a_tile = a_ptr + pid_m * BLOCK_M * K
    b_tile = b_ptr + pid_n * BLOCK_N * K

    sa_top = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [2, HALF_M, BLOCK_K], a_lds)
    sa_bot = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [2, HALF_M, BLOCK_K], a_lds)
    sb_left = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [2, HALF_N, BLOCK_K], b_lds)
    sb_right = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [2, HALF_N, BLOCK_K], b_lds)

    a_rows = gl.arange(0, HALF_M, gl.SliceLayout(1, copy))
    a_cols = gl.arange(0, BLOCK_K, gl.SliceLayout(0, copy))
    a_offs = a_rows[:, None] * K + a_cols[None, :]
    b_rows = gl.arange(0, HALF_N, gl.SliceLayout(1, copy))
    b_cols = gl.arange(0, BLOCK_K, gl.SliceLayout(0, copy))
    b_offs = b_rows[:, None] * K + b_cols[None, :]
    a_half = HALF_M * K
    b_half = HALF_N * K

    # Prologue: K-steps 0 and 1 into buffers 0 and 1, one commit group per piece, in the order the loop
    # consumes them (a_top, b_left, a_bot, b_right).
    for buf in gl.static_range(2):
        a_k = a_tile + buf * BLOCK_K
        b_k = b_tile + buf * BLOCK_K
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_top.index(buf), a_k, a_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_left.index(buf), b_k, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_bot.index(buf), a_k + a_half, a_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_right.index(buf), b_k + b_half, b_offs)
        gl.amd.cdna4.async_copy.commit_group()

    gl.amd.cdna4.async_copy.wait_group(6)
    a_top = relaxed_load(sa_top.index(0), a_dot)
    b_left = relaxed_load(sb_left.index(0).permute([1, 0]), b_dot)

    acc_tl = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)
    acc_bl = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)
    acc_tr = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)
    acc_br = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)

    # Steady state: 5 groups in flight at every read (the rest of this step and all of the next).
    a_k = a_tile + 2 * BLOCK_K
    b_k = b_tile + 2 * BLOCK_K
    for _ in range(0, K // BLOCK_K - 2, 2):
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left = k_step(
            acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, sa_top, sa_bot, sb_left, sb_right,
            a_k, b_k, a_offs, b_offs, a_half, b_half, 0, True, 5, False, a_dot, b_dot)
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left = k_step(
            acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, sa_top, sa_bot, sb_left, sb_right,
            a_k + BLOCK_K, b_k + BLOCK_K, a_offs, b_offs, a_half, b_half, 1, True, 5, False, a_dot, b_dot)
        a_k += 2 * BLOCK_K
        b_k += 2 * BLOCK_K

    # Drain: the last two K-steps issue nothing, so the allowed in-flight count falls by one per read.
    acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left = k_step(
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, sa_top, sa_bot, sb_left, sb_right,
        a_k, b_k, a_offs, b_offs, a_half, b_half, 0, False, 5, False, a_dot, b_dot)
    acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left = k_step(
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, sa_top, sa_bot, sb_left, sb_right,
        a_k, b_k, a_offs, b_offs, a_half, b_half, 1, False, 1, True, a_dot, b_dot)

    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    store_quadrant(c_ptr, acc_tl, row0, col0, N, acc_layout, HALF_M, HALF_N)
    store_quadrant(c_ptr, acc_bl, row0 + HALF_M, col0, N, acc_layout, HALF_M, HALF_N)
    store_quadrant(c_ptr, acc_tr, row0, col0 + HALF_N, N, acc_layout, HALF_M, HALF_N)
    store_quadrant(c_ptr, acc_br, row0 + HALF_M, col0 + HALF_N, N, acc_layout, HALF_M, HALF_N)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           GROUP_M: int, NUM_XCDS: int, num_warps: int):
    """C = A @ B^T for e5m2 A [M, K] and B [N, K] (both K-contiguous). Returns the compiled kernel."""
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    return bf8_gemm_kernel[grid](a, b, c, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_XCDS,
                                 num_warps=num_warps)
