"""v03 LDS: a padded, conflict-free layout for the MFMA operand reads.

What this stage adds (diff against v02)
---------------------------------------
The 16 lanes that feed one MFMA operand read 16 consecutive rows at the same K. In the row-major tile of
v02 those rows are 128 bytes apart, so their ds_read_b128 accesses fall on the same banks (the seed
measured 4-way conflicts: 64 cycles per ds_read_b128 instead of 16). This stage uses a
`PaddedSharedLayout` with 16 fp16 (32 bytes) of padding after every 512 elements, the seed's [[512, 16]].

Padding only helps if consecutive rows land in different padded blocks, while each direct-to-LDS
instruction must still write one contiguous 1 KiB. So a tile is viewed as [rows // 16, 16, BLOCK_K]
(row = 16 * outer + inner): the lanes of a copy instruction take the outer index (rows 16 apart), the
waves and registers take the inner one, and the LDS order is K, lane rows, inner rows. Every 1 KiB block
holds one instruction's write, and rows r and r+1 sit in neighbouring blocks, 32 bytes apart on the banks;
a reshape of the LDS view gives back the [rows, BLOCK_K] tile for the MFMA reads.

Stock 3.6.0 accepts only a BlockedLayout or SliceLayout for the offsets of `buffer_load_to_shared`, so the
seed's 2-D linear load layout (lanes on rows 16 apart) is not available; the 3-D blocked view above
expresses the same assignment of rows to lanes with a plain BlockedLayout.

Swizzled alternative. `SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8)` on the v02 tile also
breaks the conflicts (the XOR pattern stays within one wave's 8-row write, as direct copies require).
Compiled here: 220 arch VGPRs (.vgpr_count 476), 4 ds_read base-address VGPRs in the hot loop; the
padded layout: 218 (476), also 4 base VGPRs; the unswizzled v02: 216 (472), 2 base VGPRs.
(`max_phase=4` costs more: 238 / 496.) The seed saw the padded layout need a single base VGPR; stock
3.6.0 materialises a few more here. Bank conflicts themselves cannot be measured without the GPU.

What to look for in the ISA / IR
--------------------------------
`#ttg.padded_shared<[512:+16] ...>` in the TTGIR and 1,984 bytes more LDS than v02 (31 paddings of
32 bytes per 32 KiB tile); the hot loop itself looks like v02's (16 direct copies, 32 ds_read_b128).

Observed (stock Triton 3.6.0, compiled for gfx950 on the CPU, 4096x4096x8192, default knobs)
---------------------------------------------------------------------------------------
218 arch VGPRs + 256 AGPRs (.vgpr_count 476), 0 spills, 67,520 bytes LDS.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

STAGE = "v03"
TECHNIQUE = "conflict-free LDS (padded layout)"

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

    # Tiles are held as [rows // 16, 16, BLOCK_K] (row = 16 * outer + inner): see _layouts.
    smem_a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [BLOCK_M // 16, 16, BLOCK_K], SMEM_A)
    smem_b = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [BLOCK_N // 16, 16, BLOCK_K], SMEM_B)

    a_offs = _tile_offsets(pid_m * BLOCK_M, stride_am, BLOCK_M, BLOCK_K, LOAD_A)
    b_offs = _tile_offsets(pid_n * BLOCK_N, stride_bn, BLOCK_N, BLOCK_K, LOAD_B)

    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, MFMA)
    for k0 in range(0, K, BLOCK_K):
        gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_a, a_ptr + k0, a_offs)
        gl.amd.cdna4.async_copy.buffer_load_to_shared(smem_b, b_ptr + k0, b_offs)
        gl.amd.cdna4.async_copy.commit_group()
        gl.amd.cdna4.async_copy.wait_group(0)
        a = smem_a.reshape([BLOCK_M, BLOCK_K]).load(dot_a)
        b = smem_b.reshape([BLOCK_N, BLOCK_K]).permute([1, 0]).load(dot_b)
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
