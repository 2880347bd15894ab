"""v04 global prefetch: a 2-stage software pipeline over two LDS buffers.

What this stage adds (diff against v03)
---------------------------------------
Up to v03 each K step waited for its own copies (`wait_group(0)`) before any MFMA could start. Now each
operand has two LDS buffers. The copies of step i+1 are issued into the other buffer *before* step i is
read and multiplied, and `wait_group(1)` lets that newest group stay in flight: global latency hides
behind a whole K step of MFMAs. A prologue issues step 0; after the loop, `wait_group(0)` makes the last
step land before its reads (the seed's pitfall: a missing wait before the last LDS reads races).

Reads now use `async_copy.load_shared_relaxed`: it tells the compiler that an explicit wait_group already
ordered the read after the copies that fill its buffer. With a plain `.load`, LLVM inserts
`s_waitcnt vmcnt(0)` before the ds_reads, i.e. it waits for the prefetch of the *next* step too, and the
pipeline is gone (seen in this file's first compile).

What to look for in the ISA / IR
--------------------------------
Two-deep allocations (`!ttg.memdesc<2x...>`), `s_waitcnt vmcnt(16)` (one step's 16 copies may stay
outstanding) + `s_barrier` before the ds_reads, and an s_barrier at the top of the loop that keeps the
next copy from overwriting a buffer that other waves are still reading.

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
254 arch VGPRs + 256 AGPRs (.vgpr_count 512, the whole file), 0 spills, 135,104 bytes LDS.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v04"
TECHNIQUE = "global prefetch: 2-stage software pipeline, double-buffered LDS"

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
    # Prologue: K step 0 in flight to buffer 0.
    _copy_tiles(smem_a.index(0), smem_b.index(0), a_ptr, b_ptr, a_offs, b_offs)
    for i in range(num_k - 1):
        # Step i+1 streams into the other buffer while step i is read and multiplied.
        nxt = (i + 1) % 2
        _copy_tiles(smem_a.index(nxt), smem_b.index(nxt), a_ptr + (i + 1) * BLOCK_K, b_ptr + (i + 1) * BLOCK_K,
                    a_offs, b_offs)
        gl.amd.cdna4.async_copy.wait_group(1)  # all but the newest group landed: step i is in LDS
        a, b = _read_tiles(smem_a.index(i % 2), smem_b.index(i % 2), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
        acc = gl.amd.cdna4.mfma(a, b, acc)
    # Epilogue of the pipeline: the last step must land before its LDS reads.
    gl.amd.cdna4.async_copy.wait_group(0)
    last = (num_k - 1) % 2
    a, b = _read_tiles(smem_a.index(last), smem_b.index(last), BLOCK_M, BLOCK_N, BLOCK_K, MFMA)
    acc = gl.amd.cdna4.mfma(a, b, acc)

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
    assert a.stride(1) == 1 and b.stride(1) == 1 and c.stride(1) == 1, "K-contiguous A and B, row-major C"
    load_a, load_b, smem_a, smem_b, mfma = _layouts(BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                      LOAD_A=load_a, LOAD_B=load_b, SMEM_A=smem_a, SMEM_B=smem_b, MFMA=mfma, num_warps=num_warps)
