"""v08 - warp specialization: a TMA producer warp and two consumer warpgroups, with register reallocation.

What this stage adds: roles. `gl.warp_specialize` splits the CTA into a default partition - the two consumer
warpgroups (8 warps) that wait for tiles, issue wgmma and run the epilogue - and one extra producer warp whose
only job is to keep the TMA ring full. Each ring slot now has two mbarriers: `ready` (the TMA landed; the
producer arms it with the byte count) and `empty` (the consumers are done reading; they arrive on it once the
wgmma that read the slot has retired). The producer waits on `empty`, the consumers on `ready`, and neither side
ever waits for the other's instruction stream. The producer runs ahead across tile boundaries too, so the next
tile's first copies are in flight during this tile's last MMAs and its epilogue: the prologue bubble of v06/v07
is gone. The producer asks for only a few registers (`worker_num_regs`), which lets the compiler emit
`setmaxnreg`: the producer warpgroup gives registers back and the consumers take more for their accumulators.

Why: in v07 the consumer warps issued their own copies; every K step spent issue slots and a block-wide barrier
on that bookkeeping, and the first NUM_STAGES - 1 copies of each tile waited for the previous epilogue.

What to look for in SASS: `USETMAXREG.DEALLOC.CTAPOOL` in the producer branch and `USETMAXREG.TRY` in the consumer
branch (PTX `setmaxnreg.dec/inc.sync.aligned.u32`), the warp-id dispatch at kernel entry, `UTMALDG` only in the
producer's code, `SYNCS.ARRIVE` on the empty barriers in the consumers' loop, and HGMMA only in the consumers'.

Figures at 4096^3 with the default knobs, compile-only on Triton 3.6.0 (ptxas -v, sm_90a): 168 registers at entry (setmaxnreg:
consumers 240, producer 40), 0 spills, 208 KiB shared, 12 warps (8 consumers + the producer warp padded to a
warpgroup). Measured on an H200 (benchmarks/results/sm90_bf16_ladder.json, 2026-11-29; do_bench medians,
torch.matmul side by side): 719 TFLOP/s at 4096^3 (1.00x), 689 at 8192^3 (1.02x), 668 at 8192x8192x2048 (1.01x),
97.6% tensor-pipe active.
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

STAGE = "v08"
TECHNIQUE = "warp specialization: 1 TMA producer warp + 2 consumer warpgroups, setmaxnreg"
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
SHAPE_MULTIPLE = (1, 8, 8)  # TMA zero-fills partial boxes; row strides must be 16-byte multiples
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 3, "GROUP_M": 8, "PRODUCER_REGS": 40,
         "num_warps": 8}
KNOB_CHOICES = {"BLOCK_N": [128, 256], "NUM_STAGES": [2, 3], "GROUP_M": [4, 8, 16], "PRODUCER_REGS": [24, 40]}


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
def producer(a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K,
             NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr):
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
             NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr):
    """Two warpgroups: wgmma on each ready slot, release it once retired, TMA-store each finished tile."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
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

        tma.store_wait(pendings=0)  # the previous tile's store must have read c_smem before we overwrite it
        c_smem.store(acc.to(gl.bfloat16))
        fence_async_shared()
        tma_store(c_desc, [pid_m * BLOCK_M, pid_n * BLOCK_N], c_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_desc, M, N, K, NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr):
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)

    # The argument tuples are written out literally: a tuple first bound to a name would turn the constexprs in
    # it into run-time int32 values (Triton 3.6), and every `% NUM_STAGES` into a division.
    gl.warp_specialize([
        (consumer, (a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty,
                    M, N, K, NUM_STAGES, GROUP_M)),
        (producer, (a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty,
                    M, N, K, NUM_STAGES, GROUP_M)),
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
           NUM_STAGES: int, GROUP_M: int, PRODUCER_REGS: int, num_warps: int):
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
    return gemm_kernel[grid](a_desc, b_desc, c_desc, M, N, K, NUM_STAGES, GROUP_M, PRODUCER_REGS,
                             num_warps=num_warps)
