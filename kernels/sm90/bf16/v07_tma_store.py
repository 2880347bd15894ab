"""v07 - a TMA-store epilogue that overlaps the next tile's main loop.

What this stage adds: the output goes out through the copy engine. The accumulator is converted to bf16 and
written once into an NVMMA-swizzled C tile in shared memory, a proxy fence makes it visible to the async proxy,
and one thread issues `cp.async.bulk.tensor` shared -> global. The CTA does not wait for that store: it moves on
to the next tile's loads and MMAs, and only waits (`tma.store_wait(0)`) right before it overwrites the C tile
at the next epilogue, by which time the store has long finished. The TMA also clips rows/columns beyond M, N,
so the masks go away.

Why: v06's epilogue had every thread convert the 128 x 256 accumulator through shared scratch and issue masked
`STG`s, with the tensor core idle throughout. Now the global write is asynchronous and hides behind the next
tile; what remains on the critical path is one pass of stores into shared memory.

What to look for in SASS: `UTMASTG.2D` after the epilogue's shared stores (`STS`/`STSM`), a
`FENCE.VIEW.ASYNC.S` before it, and the bulk-group wait (`DEPBAR` on the store group) placed before the next
epilogue's stores rather than right after the UTMASTG. No STG. The C tile costs 64 KiB of shared memory, so the
ring drops to 3 stages to fit under the 227 KiB limit.

Figures at 4096^3 with the default knobs, compile-only on Triton 3.6.0 (ptxas -v, sm_90a): 154 registers, 0 spills, 208 KiB shared
(3 stages + 64 KiB C tile), 1 UTMASTG, no STG. Measured on an H200 (benchmarks/results/sm90_bf16_ladder.json,
2026-11-29; do_bench medians, torch.matmul side by side): 705 TFLOP/s at 4096^3 (0.97x), 684 at 8192^3 (1.02x), 96%
tensor-pipe active: within run-to-run noise of v06 at these shapes; what it buys is the shared-memory budget and the
freed epilogue that v08-v09 build on.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# Gluon names that changed between Triton 3.6 and 3.9, resolved once from the installed release.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # renamed in 3.8
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global  # renamed in 3.8

STAGE = "v07"
TECHNIQUE = "TMA-store epilogue, its completion awaited only before the next tile's epilogue"
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
SHAPE_MULTIPLE = (1, 8, 8)  # TMA zero-fills partial boxes; row strides must be 16-byte multiples
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 3, "GROUP_M": 8, "num_warps": 8}
KNOB_CHOICES = {"BLOCK_N": [128, 256], "NUM_STAGES": [2, 3], "GROUP_M": [4, 8, 16]}


@gluon.jit
def issue_load(a_desc, b_desc, a_smem, b_smem, ready, i, k, off_m, off_n, pred,
               NUM_STAGES: gl.constexpr, BLOCK_K: gl.constexpr):
    """Start the copies of K-step k into slot i % NUM_STAGES, i the running step count (skipped if not pred)."""
    s = i % NUM_STAGES
    bar = ready.index(s)
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma_load(a_desc, [off_m, k * BLOCK_K], bar, a_smem.index(s), pred=pred)
    tma_load(b_desc, [off_n, k * BLOCK_K], bar, b_smem.index(s), pred=pred)


@gluon.jit
def tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Grouped order: GROUP_M tile-rows are walked column by column, so concurrent CTAs share panels in L2."""
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile // tiles_per_group) * GROUP_M
    group_rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % tiles_per_group) % group_rows
    pid_n = (tile % tiles_per_group) // group_rows
    return pid_m, pid_n


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_desc, M, N, K, NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)

    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    base = 0  # running K-step count over all tiles this CTA has done: slot and phase come from it
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for i in gl.static_range(NUM_STAGES - 1):
            issue_load(a_desc, b_desc, a_smem, b_smem, ready, base + i, i, off_m, off_n, i < k_steps,
                       NUM_STAGES, BLOCK_K)

        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        for k in range(k_steps):
            s = (base + k) % NUM_STAGES
            mbarrier.wait(ready.index(s), ((base + k) // NUM_STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), acc, is_async=True)
            # At most one MMA group in flight: step k - 1 has retired, so its slot can be refilled.
            acc, _, _ = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_smem.index(s), b_smem.index(s)))
            nxt = k + NUM_STAGES - 1
            issue_load(a_desc, b_desc, a_smem, b_smem, ready, base + nxt, nxt, off_m, off_n, nxt < k_steps,
                       NUM_STAGES, BLOCK_K)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        base += k_steps

        tma.store_wait(pendings=0)  # the previous tile's store must have read c_smem before we overwrite it
        c_smem.store(acc.to(gl.bfloat16))
        fence_async_shared()
        tma_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(pendings=0)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of the device; 132 (H100/H200 SXM) when compiling without a GPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           NUM_STAGES: int, GROUP_M: int, num_warps: int):
    """C = A @ B^T. Returns the compiled kernel so callers can read registers and spills."""
    M, K = a.shape
    N = b.shape[0]
    a_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.bfloat16)
    b_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_K], gl.bfloat16)
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K], b_layout)
    c_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], gl.bfloat16)
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N], c_layout)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    grid = (min(num_sms(a.device), tiles),)
    return gemm_kernel[grid](a_desc, b_desc, c_desc, M, N, K, NUM_STAGES, GROUP_M, num_warps=num_warps)
