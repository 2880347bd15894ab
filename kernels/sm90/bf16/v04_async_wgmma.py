"""v04 - asynchronous wgmma: the MMA of step k overlaps the copy issued for step k + NUM_STAGES - 1.

What this stage adds: `is_async=True` on the wgmma and a `warpgroup_mma_wait(num_outstanding=1)` right after it.
The warps issue the MMA of step k and, instead of waiting for it, only wait until the MMA of step k - 1 has
retired. That retirement is exactly what frees slot (k - 1) % NUM_STAGES, so the refill for step
k + NUM_STAGES - 1 moves after the wait and into that slot, while the tensor core is still busy with step k.
After the loop a final wait with zero outstanding drains the last MMA before the epilogue reads the accumulator.

Why: in v03 every step ended with the warps idle until the tensor core finished, and only then were the next
copies issued; the MMA pipe drained at every step. Keeping one wgmma group in flight keeps the tensor core fed
back-to-back while the single issuing warpgroup does its bookkeeping (barrier waits, TMA issue).

What to look for in SASS: `WARPGROUP.DEPBAR.LE gsb0, 0x1` (one group allowed in flight) where v03 had `0x0`,
the `UTMALDG.2D` pair placed after it, and the accumulator registers now live across the wait.

Figures at 4096^3 with the default knobs, compile-only on Triton 3.6.0 (ptxas -v, sm_90a): 154 registers, 0 spills, 96 KiB shared.
Measured on an H200 (benchmarks/results/sm90_bf16_ladder.json, 2026-11-29; do_bench medians, torch.matmul side by
side): 662 TFLOP/s at 4096^3 (0.91x), 575 at 8192^3 (0.86x), 89% tensor-pipe active. At this tile (128 x 128, 4
warps, two CTAs per SM) asynchrony did not beat v03 (the first run gave 701 vs 671 at 4096^3 but 570 vs 623 at
8192^3); probably v03's two co-resident CTAs already cover each other's waits. Whether asynchrony pays with one CTA
per SM (v05's tile) was not measured separately; the later stages keep it.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# Gluon names that changed between Triton 3.6 and 3.9, resolved once from the installed release.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # renamed in 3.8

STAGE = "v04"
TECHNIQUE = "asynchronous wgmma, one group in flight, overlapping the next TMA loads"
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
SHAPE_MULTIPLE = (1, 8, 8)  # TMA zero-fills partial boxes; row strides must be 16-byte multiples
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": 3, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_N": [64, 128], "NUM_STAGES": [2, 3, 4, 5]}


@gluon.jit
def issue_load(a_desc, b_desc, a_smem, b_smem, ready, i, off_m, off_n, pred,
               NUM_STAGES: gl.constexpr, BLOCK_K: gl.constexpr):
    """Start the copies of K-step i into slot i % NUM_STAGES (skipped when pred is false)."""
    s = i % NUM_STAGES
    bar = ready.index(s)
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma_load(a_desc, [off_m, i * BLOCK_K], bar, a_smem.index(s), pred=pred)
    tma_load(b_desc, [off_n, i * BLOCK_K], bar, b_smem.index(s), pred=pred)


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_ptr, M, N, K, NUM_STAGES: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)

    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    k_steps = gl.cdiv(K, BLOCK_K)
    for i in gl.static_range(NUM_STAGES - 1):
        issue_load(a_desc, b_desc, a_smem, b_smem, ready, i, off_m, off_n, i < k_steps, NUM_STAGES, BLOCK_K)

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    for k in range(k_steps):
        s = k % NUM_STAGES
        mbarrier.wait(ready.index(s), (k // NUM_STAGES) & 1)
        acc = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), acc, is_async=True)
        # At most one MMA group in flight: step k - 1 has retired, so its slot can be refilled.
        acc, _, _ = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_smem.index(s), b_smem.index(s)))
        nxt = k + NUM_STAGES - 1
        issue_load(a_desc, b_desc, a_smem, b_smem, ready, nxt, off_m, off_n, nxt < k_steps, NUM_STAGES, BLOCK_K)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))

    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.bfloat16), store_layout)
    rows_c = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
    cols_c = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_layout))
    mask = (rows_c[:, None] < M) & (cols_c[None, :] < N)
    gl.store(c_ptr + rows_c[:, None] * N + cols_c[None, :], out, mask=mask)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           NUM_STAGES: int, num_warps: int):
    """C = A @ B^T. Returns the compiled kernel so callers can read registers and spills."""
    M, K = a.shape
    N = b.shape[0]
    a_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.bfloat16)
    b_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_K], gl.bfloat16)
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K], b_layout)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    return gemm_kernel[grid](a_desc, b_desc, c, M, N, K, NUM_STAGES, num_warps=num_warps)
