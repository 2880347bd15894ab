"""v09 - final tuning: a split epilogue that buys a fourth ring stage, and a tile that fits the grid.

What this stage adds, on top of the warp-specialized kernel of v08:
1. A split epilogue. The 128 x 256 accumulator leaves in EPILOGUE_SPLIT column slices (reshape to
   [128, 2, 128], permute, split: a pure register renaming, no data movement), each written into a
   128 x (256 / EPILOGUE_SPLIT) C buffer and shipped by its own TMA store. Two C buffers alternate, so a slice
   only waits for the store issued two slices earlier. With a split of 4 the C staging shrinks from one 64 KiB
   tile to two 16 KiB slices, and the ring gets NUM_STAGES = 4 (4 x 48 KiB) under the 227 KiB limit.
2. A tile that fits the grid. Skinny problems (M = 256 here) make only 2 x 32 = 64 tiles of 128 x 256: half the
   132 SMs would idle for the whole kernel. When 128 x 256 tiles cannot fill the machine, launch halves
   BLOCK_N to 128 (the wgmma becomes m64n128k16), doubling the tile count, and gives the ring 1.5x the slots
   (6 x 32 KiB) so it keeps its bytes in flight.
3. Knobs checked on the H200 (benchmarks/results/sm90_bf16_sweep*.json): GROUP_M 4/8/16 and PRODUCER_REGS
   24/40 made no difference beyond run-to-run noise; a 3-stage ring with a 2-way split was 0-5% slower at the
   large shapes; 128 x 128 tiles everywhere lost 4-9%. The defaults stay.

Why: v08 had only 3 ring stages (the 64 KiB C tile took the fourth), so at every tile start the consumers could
wait on HBM latency, and its grid left SMs idle on the skinny shape.

What to look for in SASS: EPILOGUE_SPLIT `UTMASTG.2D` per tile with a bulk-store wait (`DEPBAR`) allowing one
store in flight between them, 4-slot ring addressing, and otherwise v08's producer/consumer structure
(`USETMAXREG`, HGMMA only in the consumers, UTMALDG only in the producer).

Figures at 4096^3 with the default knobs, compile-only on Triton 3.6.0 (ptxas -v, sm_90a): 168 registers at entry, 0 spills, 224 KiB
shared (4 x 48 KiB ring + 2 x 16 KiB C slices), 4 UTMASTG per tile. Measured on an H200
(benchmarks/results/sm90_bf16_ladder.json, 2026-11-29; do_bench medians, torch.matmul side by side): 718 TFLOP/s at
4096^3 (0.99x), 712 at 8192^3 (1.05x), 670 at 8192x8192x2048 (1.01x), 668 at 16384x8192x4096 (1.00x), 97.5%
tensor-pipe active. Across three runs 0.99-1.06x at 4096^3 and 1.01-1.05x at 8192^3. The 256 x 8192 x 8192 shape (a
~55 us kernel) swung between 326 and 627 TFLOP/s from one process to the next (0.51-0.98x); its timing is not
trustworthy yet (see the ladder report).
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
barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # renamed in 3.7

STAGE = "v09"
TECHNIQUE = "final tuning: split double-buffered TMA-store epilogue, 4-stage ring, grid-filling tile"
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
SHAPE_MULTIPLE = (1, 8, 8)  # TMA zero-fills partial boxes; row strides must be 16-byte multiples
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 4, "GROUP_M": 8, "PRODUCER_REGS": 40,
         "EPILOGUE_SPLIT": 4, "FIT_GRID": 1, "num_warps": 8}
# EPILOGUE_SPLIT stays 4: a 2-way split double-buffers two 128 x 128 bf16 C slices (64 KiB), which with the
# default 4-stage ring (4 x 48 KiB) needs 256 KiB of shared memory, over the 227 KiB limit; it fits only at
# NUM_STAGES = 3, and KNOB_CHOICES cannot pair values (the tune proposer sweeps every combination).
KNOB_CHOICES = {"NUM_STAGES": [3, 4], "GROUP_M": [4, 8, 16], "PRODUCER_REGS": [24, 40], "FIT_GRID": [0, 1]}


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
def split_columns(x):
    """[M, N] -> ([M, N/2], [M, N/2]): for the wgmma layout this only renames registers."""
    BM: gl.constexpr = x.shape[0]
    BN: gl.constexpr = x.shape[1]
    return gl.split(gl.permute(gl.reshape(x, [BM, 2, BN // 2]), [0, 2, 1]))


@gluon.jit
def store_slice(c_desc, c_smem, value, off_m, off_n, t):
    """Stage one C slice in buffer t % 2 and TMA-store it; the store issued two slices ago must be done first."""
    buf = c_smem.index(t % 2)
    tma.store_wait(pendings=1)
    buf.store(value)
    fence_async_shared()
    tma_store(c_desc, [off_m, off_n], buf)


@gluon.jit
def producer(a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K,
             NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr):
    """One warp: for every (tile, K step), wait until the slot is free, then start its two TMA copies."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_steps):
            s = i % NUM_STAGES
            # Lap 0 passes at once (a fresh barrier is in the phase before 0); later laps wait for the consumers.
            mbarrier.wait(empty.index(s), ((i // NUM_STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma_load(a_desc, [pid_m * BLOCK_M, k * BLOCK_K], bar, a_smem.index(s))
            tma_load(b_desc, [pid_n * BLOCK_N, k * BLOCK_K], bar, b_smem.index(s))
            i += 1


@gluon.jit
def consumer(a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K,
             NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr):
    """Two warpgroups: wgmma on each ready slot, release it once retired, TMA-store each finished tile."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    SUB_N: gl.constexpr = c_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
    t = 0  # C slices stored so far: selects the staging buffer
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        for k in range(k_steps):
            s = i % NUM_STAGES
            mbarrier.wait(ready.index(s), (i // NUM_STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), acc, is_async=True)
            acc, _, _ = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_smem.index(s), b_smem.index(s)))
            # Step i - 1 has retired in every warp once all have passed the wait: hand its slot back.
            barrier()
            mbarrier.arrive(empty.index((i + NUM_STAGES - 1) % NUM_STAGES), pred=k > 0)
            i += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        barrier()
        mbarrier.arrive(empty.index((i + NUM_STAGES - 1) % NUM_STAGES))

        out = acc.to(gl.bfloat16)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if EPILOGUE_SPLIT == 1:
            store_slice(c_desc, c_smem, out, off_m, off_n, t)
        elif EPILOGUE_SPLIT == 2:
            lo, hi = split_columns(out)
            store_slice(c_desc, c_smem, lo, off_m, off_n, t)
            store_slice(c_desc, c_smem, hi, off_m, off_n + SUB_N, t + 1)
        else:
            lo, hi = split_columns(out)
            q0, q1 = split_columns(lo)
            q2, q3 = split_columns(hi)
            store_slice(c_desc, c_smem, q0, off_m, off_n, t)
            store_slice(c_desc, c_smem, q1, off_m, off_n + SUB_N, t + 1)
            store_slice(c_desc, c_smem, q2, off_m, off_n + 2 * SUB_N, t + 2)
            store_slice(c_desc, c_smem, q3, off_m, off_n + 3 * SUB_N, t + 3)
        t += EPILOGUE_SPLIT
    tma.store_wait(pendings=0)


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_desc, M, N, K, NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                PRODUCER_REGS: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr, num_warps: gl.constexpr):
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)

    # The argument tuples are written out literally: a tuple first bound to a name would turn the constexprs in
    # it into run-time int32 values (Triton 3.6), and every `% NUM_STAGES` into a division.
    gl.warp_specialize([
        (consumer, (a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty,
                    M, N, K, NUM_STAGES, GROUP_M, EPILOGUE_SPLIT)),
        (producer, (a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty,
                    M, N, K, NUM_STAGES, GROUP_M, EPILOGUE_SPLIT)),
    ], worker_num_warps=[1], worker_num_regs=[PRODUCER_REGS])
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of the device; 132 (H100/H200 SXM) when compiling without a GPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           NUM_STAGES: int, GROUP_M: int, PRODUCER_REGS: int, EPILOGUE_SPLIT: int, FIT_GRID: int, num_warps: int):
    """C = A @ B^T. Returns the compiled kernel so callers can read registers and spills."""
    M, K = a.shape
    N = b.shape[0]
    sms = num_sms(a.device)
    if FIT_GRID and triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N) < sms and BLOCK_N > 128:
        # Half-width tiles: same C slice width, and the ring keeps its bytes with 1.5x the slots.
        BLOCK_N //= 2
        EPILOGUE_SPLIT = max(1, EPILOGUE_SPLIT // 2)
        NUM_STAGES = NUM_STAGES * 3 // 2
    sub_n = BLOCK_N // EPILOGUE_SPLIT
    a_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.bfloat16)
    b_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_K], gl.bfloat16)
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K], b_layout)
    c_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, sub_n], gl.bfloat16)
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, sub_n], c_layout)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    grid = (min(sms, tiles),)
    return gemm_kernel[grid](a_desc, b_desc, c_desc, M, N, K, NUM_STAGES, GROUP_M, PRODUCER_REGS, EPILOGUE_SPLIT,
                             num_warps=num_warps)
