"""v05 local prefetch: three steps in flight (MFMA on k, LDS reads of k+1, global copies of k+2).

What this stage adds (diff against v04)
---------------------------------------
In v04 the MFMAs of a step still waited for that step's ds_reads. Now the operands of step i+1 are read
from LDS while step i's MFMAs run (register double buffering: `a, b` and `a_next, b_next`), and the copies
of step i+2 go into the buffer step i came from. Order in the loop: wait until step i+1 has landed; the
barrier the compiler puts after that wait (other waves' copies must be visible) also proves that every
wave has finished reading step i's buffer, so the copy of step i+2 may overwrite it only now. Issuing the
copy before that wait races with slower waves: stock 3.6.0 inserts no barrier for that cross-iteration
write-after-read (seen in this file's first compile, a version of the seed's "too few barriers" pitfall).

Register cost. Two full operand sets (2 x 128 VGPRs at 4 waves) plus the 256-register accumulator do not
fit the 512-register budget: the seed's authors kept this stage spill-free only with their out-of-tree
scheduling plugin; with stock 3.6.0 their own stage spills. v07 and v08 restructure the loop so that fewer
operand registers are live at once.

What to look for in the ISA
---------------------------
Per loop iteration: 16 direct-to-LDS copies, 32 ds_read_b128 of the next step, 128 MFMAs of this one,
and where the spills went (`scratch_store/scratch_load`, "Folded Spill").

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
256 arch VGPRs + 256 AGPRs (.vgpr_count 512), .vgpr_spill_count 206, ScratchSize 796 bytes, 135,104
bytes LDS. The spill code (116 scratch instructions) sits in the prologue and the drain; the hot loop
itself has no scratch access here, but 40 v_accvgpr moves.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v05"
TECHNIQUE = "local prefetch: 3-stage pipeline (MFMA k, LDS reads k+1, global loads k+2)"

TARGET = "gfx950"
DTYPE = "float16"
OUT_DTYPE = "float16"
SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (512, 768, 1024)]
SHAPE_MULTIPLE = (256, 256, 64)  # whole tiles only: no masks from here on
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
    # Prologue: steps 0 and 1 in flight; step 0 read into registers.
    _copy_tiles(smem_a.index(0), smem_b.index(0), a_ptr, b_ptr, a_offs, b_offs)
    _copy_tiles(smem_a.index(1), smem_b.index(1), a_ptr + BLOCK_K, b_ptr + BLOCK_K, a_offs, b_offs)
    gl.amd.cdna4.async_copy.wait_group(1)
    a, b = _read_tiles(smem_a.index(0), smem_b.index(0), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
    for i in range(num_k - 2):
        # Three steps in flight: global->LDS for i+2, LDS->registers for i+1, MFMA on i.
        slot = i % 2  # step i's buffer: its data is in registers already
        # Step i+1 landed. The compiler follows the wait with an s_barrier (other waves' copies must be
        # visible too); that barrier also guarantees every wave has finished reading step i's buffer, so
        # the copy of step i+2 may overwrite it. Copying before this wait would race with slower waves.
        gl.amd.cdna4.async_copy.wait_group(0)
        _copy_tiles(smem_a.index(slot), smem_b.index(slot), a_ptr + (i + 2) * BLOCK_K, b_ptr + (i + 2) * BLOCK_K,
                    a_offs, b_offs)
        a_next, b_next = _read_tiles(smem_a.index(1 - slot), smem_b.index(1 - slot), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
        acc = gl.amd.cdna4.mfma(a, b, acc)
        a, b = a_next, b_next
    # Drain: step num_k-1 must land before its LDS reads.
    gl.amd.cdna4.async_copy.wait_group(0)
    last = (num_k - 1) % 2
    a_next, b_next = _read_tiles(smem_a.index(last), smem_b.index(last), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
    acc = gl.amd.cdna4.mfma(a, b, acc)
    acc = gl.amd.cdna4.mfma(a_next, b_next, acc)

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
    assert m % BLOCK_M == 0 and n % BLOCK_N == 0 and k % BLOCK_K == 0, "v02+ handle whole tiles only"
    assert k >= 2 * BLOCK_K, "the 3-stage pipeline needs at least two K steps"
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load_a, load_b, smem_a, smem_b, mfma = _layouts(BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD_A=load_a, LOAD_B=load_b, SMEM_A=smem_a, SMEM_B=smem_b, MFMA=mfma, num_warps=num_warps)
