"""v00 - register-operand MMA (mma_v2) with plain global loads.

What this stage is: the textbook blocked GEMM. Each program owns one BLOCK_M x BLOCK_N tile of C and walks K
in BLOCK_K steps. Every step loads a tile of A and a tile of B with ordinary global loads into a coalesced
blocked layout, converts them to the register layouts `mma.sync` wants (the compiler routes that conversion
through shared memory, with `ldmatrix`), and multiplies with the Ampere-era warp-level MMA.

Why start here: it is the Hopper counterpart of the seed's v00 and the baseline every later stage is compared
against. `mma.sync` is a per-warp instruction fed from registers; it cannot use Hopper's warpgroup tensor-core
path, so even with perfect overlap it tops out well below the wgmma peak (LADDERS.md measured a naive kernel
of this kind at about 220-233 TFLOP/s on the H200, against 784 for torch.matmul at 4096^3).

What to look for in SASS: `HMMA.16816.F32.BF16` in the loop, `LDG.E.128` global loads, `STS`/`LDSM`
(ldmatrix) for the layout conversion, and two `BAR.SYNC` per iteration around the shared-memory round trip.
There is no software pipelining: each load is consumed in the same iteration, so the warps stall on global
latency every step.

Figures at 4096^3 with the default knobs, compile-only on Triton 3.6.0 (ptxas -v, sm_90a): 230 registers, 0 spills, 4 KiB shared
(conversion scratch), 64 HMMA.16816 per K step. BLOCK_K = 64 doubles the operand registers: at 4 warps ptxas then
spills, also inside the K loop; at 8 warps it does not. Measured on an H200 (benchmarks/results/sm90_bf16_ladder.json,
2026-11-29; do_bench medians, torch.matmul side by side): 152 TFLOP/s at 4096^3 (0.20x torch.matmul), 150 at 8192^3
(0.20x), 25% tensor-pipe active at 8192^3. That is below the 220-233 TFLOP/s LADDERS.md records for another naive
mma_v2 kernel; this one's BLOCK_K = 32 and unpipelined loop are the likely difference (not measured).
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

STAGE = "v00"
TECHNIQUE = "register-operand MMA (mma_v2) with plain global loads"
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
# No masks: every dimension must be a whole number of tiles, for every BLOCK_K in KNOB_CHOICES (K a multiple of 64;
# with 32 a held-out K of 19 x 32 made BLOCK_K = 64 read past the rows and fail the correctness check).
SHAPE_MULTIPLE = (128, 128, 64)
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_K": [32, 64], "num_warps": [4, 8]}


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr):
    # Loads: 8 bf16 (16 bytes) per thread along K, a warp covers 4 rows x 64 columns.
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [num_warps, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[num_warps // 2, 2],
                                                         instr_shape=[16, 8])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=2)

    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    rows_a = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_layout))
    rows_b = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load_layout))
    cols_k = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load_layout))
    a_ptrs = a_ptr + rows_a[:, None] * K + cols_k[None, :]
    b_ptrs = b_ptr + rows_b[:, None] * K + cols_k[None, :]

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    for _k in range(0, K, BLOCK_K):
        a = gl.convert_layout(gl.load(a_ptrs), a_layout)
        # B arrives N x K; the MMA wants K x N, so transpose the register tile (a view, no data movement).
        b = gl.convert_layout(gl.permute(gl.load(b_ptrs), [1, 0]), b_layout)
        acc = mma_v2(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K

    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.bfloat16), store_layout)
    rows_c = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
    cols_c = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_layout))
    gl.store(c_ptr + rows_c[:, None] * N + cols_c[None, :], out)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           num_warps: int):
    """C = A @ B^T. Returns the compiled kernel so callers can read registers and spills."""
    M, K = a.shape
    N = b.shape[0]
    assert M % BLOCK_M == 0 and N % BLOCK_N == 0 and K % BLOCK_K == 0, "v00 handles whole tiles only"
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    return gemm_kernel[grid](a, b, c, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps=num_warps)
