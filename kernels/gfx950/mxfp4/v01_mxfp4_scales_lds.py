"""mxfp4 v01 - scales straight to LDS: the scale tiles ride in the operands' async-copy groups.

What changes from v00: v00's scale pipeline (coalesced `buffer_load` to registers, `local_store` to LDS,
`local_load` in the MFMA scale layout) has a cost that shows in its ISA: each `ds_write` of the scale
registers is preceded by `s_waitcnt vmcnt(0)`. The compiler cannot tell the scale store's LDS addresses
from those the direct-to-LDS operand copies are still writing, so it waits for every copy in flight,
including the next steps' prefetches: once per K-step the two-step-deep pipeline drains.

Here the scale tiles never touch registers. Each [256, 8]-byte scale tile is copied global -> LDS with
`buffer_load_to_shared` (one dword per lane: 4 consecutive scales of a row; a wave writes 256 contiguous
bytes, so the LDS tile is plain row-major) in the same commit group as that K-step's first operand piece,
and read back with `load_shared_relaxed` in the MFMA scale layout. Nothing is stored from registers, so no
wait drains the copies; the async-copy waits the operands already need cover the scales too.

Why a three-slot scale ring (the operands have two buffers): the step-(i+2) scales are issued with the
step-(i+2) a_top copy, at the start of step i, but the step-i bottom/right scales are still being read
during step i's first two regions. With two slots the copy could overwrite them under another wave's
read; with three, slot (i+2) % 3 was last read during step i-1, before the barriers of step i.

Trade-off to look for: the row-major scale tile puts a lane's 8 A-scales (rows r, r+32, r+64, r+96 x two
K-groups) in 8 different places, so the scale reads become `ds_read_u8` x 8 (A half) and x 4 (B half)
per half-tile plus a few VALU ops to pack them, where v00 read one `ds_read_b64`/`ds_read_b32`. Those are
cheap LDS ops that overlap the MFMAs; the drained pipeline was not.

What to look for in the ISA (one K-step per loop trip): `buffer_load_dword ... lds` (the two scale
copies) next to the 8 `buffer_load_dwordx4 ... lds` operand copies, no `ds_write`, 24 `ds_read_u8` for the
scales, only the async waits' `s_waitcnt vmcnt(12|14)` (never vmcnt(0)), 64
`v_mfma_scale_f32_16x16x128_f8f6f4 ... cbsz:4 blgp:4`, one barrier fewer than v00 (4), and no scratch.

Observed at compile time (triton 3.6.0, gfx950, 4096x4096x32768, CPU compile, default knobs): 8 waves,
256 VGPRs, 0 AGPRs, 0 spills, 0 scratch, 159,232 bytes of LDS (of 163,840), occupancy 2 waves/SIMD;
64 MFMAs x 16 cycles per wave per K-step. Not run on a GPU (the seed publishes 5160-5255 TFLOP/s for its
MXFP4 kernel on an MI355X).
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.amd.cdna4.async_copy import load_shared_relaxed as relaxed_load
from triton.runtime.jit import constexpr_function

STAGE = "mxfp4-v01"
TECHNIQUE = "scales copied straight to LDS inside the operand async-copy groups (3-slot ring): no vmcnt(0) drain"
TARGET = "gfx950"
DTYPE = "float4_e2m1"
OUT_DTYPE = "bfloat16"
SCALES = "e8m0_k32"
SHAPES = [(4096, 4096, 32768), (4096, 4096, 8192), (8192, 8192, 8192)]
SHAPE_MULTIPLE = (256, 256, 512)  # whole tiles, and at least the two K-steps the drain handles
KNOBS = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 256, "GROUP_M": 4, "NUM_XCDS": 8, "num_warps": 8}
KNOB_CHOICES = {"GROUP_M": [1, 4, 8], "NUM_XCDS": [1, 8]}

FORMAT = gl.constexpr("e2m1")
SCALE_BLOCK = gl.constexpr(32)  # K-values per e8m0 scale
SCALE_SLOTS = gl.constexpr(3)


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
def k_step(acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left,
           sa_top, sa_bot, sb_left, sb_right, ssa, ssb, a_next, b_next, a_offs, b_offs, a_half, b_half,
           as_next, bs_next, s_offs, BUF, SLOT, NEXT_SLOT, FILL_SLOT,
           PREFETCH: gl.constexpr, WAIT: gl.constexpr, LAST: gl.constexpr,
           a_dot: gl.constexpr, b_dot: gl.constexpr, as_layout: gl.constexpr, bs_layout: gl.constexpr,
           HALF_M: gl.constexpr, HALF_N: gl.constexpr):
    """One K-step: operand buffer BUF (i % 2), scale slots SLOT (i % 3), NEXT_SLOT and FILL_SLOT (i + 2).

    As in v00, a_top/b_left/as_top/bs_left of this step arrive in registers and those of the next step
    leave in them (unless LAST). With PREFETCH, the first copy group also carries step i+2's scale tiles
    (scalar bases as_next/bs_next) into scale slot FILL_SLOT.
    """
    acc_tl = gl.amd.cdna4.mfma_scaled(a_top, as_top, FORMAT, b_left, bs_left, FORMAT, acc_tl)
    gl.amd.cdna4.async_copy.wait_group(WAIT)
    a_bot = relaxed_load(sa_bot.index(BUF), a_dot)
    as_bot = relaxed_load(ssa.index(SLOT).slice(HALF_M, HALF_M), as_layout)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_top.index(BUF), a_next, a_offs)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(ssa.index(FILL_SLOT), as_next, s_offs)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(ssb.index(FILL_SLOT), bs_next, s_offs)
        gl.amd.cdna4.async_copy.commit_group()

    acc_bl = gl.amd.cdna4.mfma_scaled(a_bot, as_bot, FORMAT, b_left, bs_left, FORMAT, acc_bl)
    gl.amd.cdna4.async_copy.wait_group(WAIT if PREFETCH else WAIT - 1)
    b_right = relaxed_load(sb_right.index(BUF).permute([1, 0]), b_dot)
    bs_right = relaxed_load(ssb.index(SLOT).slice(HALF_N, HALF_N), bs_layout)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_left.index(BUF), b_next, b_offs)
        gl.amd.cdna4.async_copy.commit_group()

    acc_tr = gl.amd.cdna4.mfma_scaled(a_top, as_top, FORMAT, b_right, bs_right, FORMAT, acc_tr)
    if not LAST:
        gl.amd.cdna4.async_copy.wait_group(WAIT if PREFETCH else WAIT - 2)
        a_top = relaxed_load(sa_top.index(1 - BUF), a_dot)
        as_top = relaxed_load(ssa.index(NEXT_SLOT).slice(0, HALF_M), as_layout)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_bot.index(BUF), a_next + a_half, a_offs)
        gl.amd.cdna4.async_copy.commit_group()

    acc_br = gl.amd.cdna4.mfma_scaled(a_bot, as_bot, FORMAT, b_right, bs_right, FORMAT, acc_br)
    if not LAST:
        gl.amd.cdna4.async_copy.wait_group(WAIT if PREFETCH else WAIT - 3)
        b_left = relaxed_load(sb_left.index(1 - BUF).permute([1, 0]), b_dot)
        bs_left = relaxed_load(ssb.index(NEXT_SLOT).slice(0, HALF_N), bs_layout)
    if PREFETCH:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_right.index(BUF), b_next + b_half, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
    return acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left


@gluon.jit
def store_quadrant(c_ptr, acc, row0, col0, N, acc_layout: gl.constexpr, HALF_M: gl.constexpr,
                   HALF_N: gl.constexpr):
    rows = row0 + gl.arange(0, HALF_M, gl.SliceLayout(1, acc_layout))
    cols = col0 + gl.arange(0, HALF_N, gl.SliceLayout(0, acc_layout))
    offs = rows[:, None] * N + cols[None, :]
    gl.amd.cdna4.buffer_store(acc.to(c_ptr.dtype.element_ty), c_ptr, offs)


@gluon.jit
def mxfp4_gemm_kernel(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, M, N, K, KP, KS,
                      BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                      GROUP_M: gl.constexpr, NUM_XCDS: gl.constexpr, num_warps: gl.constexpr):
    # KP = K / 2 bytes per packed row, KS = K / 32 scales per row (passed for divisibility specialization).
    HALF_M: gl.constexpr = BLOCK_M // 2
    HALF_N: gl.constexpr = BLOCK_N // 2
    BLOCK_KP: gl.constexpr = BLOCK_K // 2
    BLOCK_KS: gl.constexpr = BLOCK_K // SCALE_BLOCK
    gl.static_assert(BLOCK_M == BLOCK_N, "A and B scale tiles share one offset tensor")
    copy: gl.constexpr = copy_layout(num_warps)
    a_lds: gl.constexpr = lds_layout(HALF_M, BLOCK_KP)
    b_lds: gl.constexpr = lds_layout(HALF_N, BLOCK_KP)
    acc_layout: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 128], transposed=True,
                                                    warps_per_cta=[2, num_warps // 2])
    a_dot: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=16)
    b_dot: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=16)
    as_layout: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(a_dot, [HALF_M, BLOCK_KS])
    bs_layout: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(b_dot, [HALF_N, BLOCK_KS])
    # Scale copy: 4 consecutive scales of a row per lane, lanes down 32 rows x 2 halves, row-major in LDS:
    # each wave writes 256 contiguous bytes, as direct-to-LDS needs.
    scale_copy: gl.constexpr = gl.BlockedLayout([1, 4], [32, 2], [num_warps, 1], [1, 0])
    scale_lds: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])

    pid_m, pid_n = tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M, NUM_XCDS)
    a_tile = a_ptr + pid_m * BLOCK_M * KP
    b_tile = b_ptr + pid_n * BLOCK_N * KP
    as_tile = a_scale_ptr + pid_m * BLOCK_M * KS
    bs_tile = b_scale_ptr + pid_n * BLOCK_N * KS

    sa_top = gl.allocate_shared_memory(gl.uint8, [2, HALF_M, BLOCK_KP], a_lds)
    sa_bot = gl.allocate_shared_memory(gl.uint8, [2, HALF_M, BLOCK_KP], a_lds)
    sb_left = gl.allocate_shared_memory(gl.uint8, [2, HALF_N, BLOCK_KP], b_lds)
    sb_right = gl.allocate_shared_memory(gl.uint8, [2, HALF_N, BLOCK_KP], b_lds)
    ssa = gl.allocate_shared_memory(gl.uint8, [SCALE_SLOTS, BLOCK_M, BLOCK_KS], scale_lds)
    ssb = gl.allocate_shared_memory(gl.uint8, [SCALE_SLOTS, BLOCK_N, BLOCK_KS], scale_lds)

    a_rows = gl.arange(0, HALF_M, gl.SliceLayout(1, copy))
    a_cols = gl.arange(0, BLOCK_KP, gl.SliceLayout(0, copy))
    a_offs = a_rows[:, None] * KP + a_cols[None, :]
    b_rows = gl.arange(0, HALF_N, gl.SliceLayout(1, copy))
    b_cols = gl.arange(0, BLOCK_KP, gl.SliceLayout(0, copy))
    b_offs = b_rows[:, None] * KP + b_cols[None, :]
    a_half = HALF_M * KP
    b_half = HALF_N * KP
    s_rows = gl.arange(0, BLOCK_M, gl.SliceLayout(1, scale_copy))
    s_cols = gl.arange(0, BLOCK_KS, gl.SliceLayout(0, scale_copy))
    s_offs = s_rows[:, None] * KS + s_cols[None, :]

    # Prologue: K-steps 0 and 1, one commit group per operand piece in consumption order; each step's
    # scale tiles join its first group.
    for step in gl.static_range(2):
        a_k = a_tile + step * BLOCK_KP
        b_k = b_tile + step * BLOCK_KP
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_top.index(step), a_k, a_offs)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(ssa.index(step), as_tile + step * BLOCK_KS, s_offs)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(ssb.index(step), bs_tile + step * BLOCK_KS, s_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_left.index(step), b_k, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sa_bot.index(step), a_k + a_half, a_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.buffer_load_to_shared(sb_right.index(step), b_k + b_half, b_offs)
        gl.amd.cdna4.async_copy.commit_group()

    gl.amd.cdna4.async_copy.wait_group(6)
    a_top = relaxed_load(sa_top.index(0), a_dot)
    b_left = relaxed_load(sb_left.index(0).permute([1, 0]), b_dot)
    as_top = relaxed_load(ssa.index(0).slice(0, HALF_M), as_layout)
    bs_left = relaxed_load(ssb.index(0).slice(0, HALF_N), bs_layout)

    acc_tl = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)
    acc_bl = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)
    acc_tr = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)
    acc_br = gl.zeros([HALF_M, HALF_N], gl.float32, acc_layout)

    a_k = a_tile + 2 * BLOCK_KP
    b_k = b_tile + 2 * BLOCK_KP
    as_k = as_tile + 2 * BLOCK_KS
    bs_k = bs_tile + 2 * BLOCK_KS
    for i in range(K // BLOCK_K - 2):
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left = k_step(
            acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left,
            sa_top, sa_bot, sb_left, sb_right, ssa, ssb, a_k, b_k, a_offs, b_offs, a_half, b_half,
            as_k, bs_k, s_offs, i % 2, i % SCALE_SLOTS, (i + 1) % SCALE_SLOTS, (i + 2) % SCALE_SLOTS,
            True, 5, False, a_dot, b_dot, as_layout, bs_layout, HALF_M, HALF_N)
        a_k += BLOCK_KP
        b_k += BLOCK_KP
        as_k += BLOCK_KS
        bs_k += BLOCK_KS

    # Drain: the last two K-steps issue nothing; runtime indices keep LDS addresses from living (and being
    # spilled) across the loop.
    last = K // BLOCK_K - 1
    acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left = k_step(
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left,
        sa_top, sa_bot, sb_left, sb_right, ssa, ssb, a_k, b_k, a_offs, b_offs, a_half, b_half,
        as_k, bs_k, s_offs, (last - 1) % 2, (last - 1) % SCALE_SLOTS, last % SCALE_SLOTS, 0,
        False, 5, False, a_dot, b_dot, as_layout, bs_layout, HALF_M, HALF_N)
    acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left = k_step(
        acc_tl, acc_bl, acc_tr, acc_br, a_top, b_left, as_top, bs_left,
        sa_top, sa_bot, sb_left, sb_right, ssa, ssb, a_k, b_k, a_offs, b_offs, a_half, b_half,
        as_k, bs_k, s_offs, last % 2, last % SCALE_SLOTS, 0, 0,
        False, 1, True, a_dot, b_dot, as_layout, bs_layout, HALF_M, HALF_N)

    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    store_quadrant(c_ptr, acc_tl, row0, col0, N, acc_layout, HALF_M, HALF_N)
    store_quadrant(c_ptr, acc_bl, row0 + HALF_M, col0, N, acc_layout, HALF_M, HALF_N)
    store_quadrant(c_ptr, acc_tr, row0, col0 + HALF_N, N, acc_layout, HALF_M, HALF_N)
    store_quadrant(c_ptr, acc_br, row0 + HALF_M, col0 + HALF_N, N, acc_layout, HALF_M, HALF_N)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
           BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, GROUP_M: int, NUM_XCDS: int, num_warps: int):
    """C = dequant(A) @ dequant(B)^T: a uint8 [M, K/2], b uint8 [N, K/2], scales uint8 [M|N, K/32]."""
    M, KP = a.shape
    N = b.shape[0]
    K = 2 * KP
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    return mxfp4_gemm_kernel[grid](a, b, c, a_scale, b_scale, M, N, K, KP, K // SCALE_BLOCK.value,
                                   BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_XCDS, num_warps=num_warps)
