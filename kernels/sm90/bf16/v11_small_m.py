"""v11 - a decode path for M <= 128: operands swapped, A's box trimmed, one consumer warpgroup, split-K over all SMs.

What a decode GEMM needs that v10 lacks. At M = 1 to 128 tokens the layer is C[M, N] = A[M, K] @ W[N, K]^T with
a weight W of tens to hundreds of MiB and an A of a few hundred KiB: the time is the time to stream W from HBM
once, so what counts is how many SMs stream it and how many bytes each keeps in flight, not tensor-core work.
v10 handles it badly on both counts. Its tile is 128 tokens x 256 n, so at M = 16 seven eighths of every wgmma
and of A's shared-memory box is padding; and the tile grid is one row of N / 256 tiles: at 16 x 4096 x 14336
that is 16 tiles, split-K 4 (its cap) makes 64 CTAs, and 68 of the 132 SMs stream nothing (issue 25: v10 at
0.39-0.78x torch.matmul under CUDA-graph replay at M = 16). What this stage adds, for M <= SMALL_M (128):
1. Swapped operands: the kernel computes C^T = W @ A^T. W's rows fill wgmma's M side (64 per instruction, a
   128-row tile per warpgroup) and the tokens become wgmma's N, which may be any multiple of 8 up to 256: the
   N of the instruction is M rounded up to a power of two (at least 16), so the tensor core and the shared
   memory hold almost only real work (`HGMMA.64x16x16` at M = 16).
2. A's ring slot trimmed to the rows that exist (that rounded M, not 128), and filled by TMA boxes that stop at
   M: one box when M fills the slot, else 16-row boxes, the last overhanging M by < 16 rows. A box past M is
   zero-filled, and on the H200 that is slower than loading real rows (stop 33, benchmarks/results/
   v11_abox_sweep.md: one 128-row box at M = 72 took 1.6x the time of M = 128 at 8192 x 8192; 16-row boxes made
   M = 72 and 96 as fast as 128). A ring slot is W's 128 x 64 box (16 KiB) plus A's few rows, so the ring is 5
   to 10 slots deep within SMALL_SMEM_BYTES (up to ~180 KiB in flight per SM), enough to keep HBM busy.
3. One consumer warpgroup (4 warps) and the producer warp: a tile's accumulator is 128 x M fp32, at most
   128 registers per thread, and a second warpgroup would only halve the rows each one streams.
4. Split-K only as far as HBM needs it: the smallest S in 1..16 that puts 48 x 128 of W's rows in flight
   (tiles x S x tile rows, SMALL_FILL_ROWS), with balanced K ranges (>= 4 steps each), and 64-row tiles when A's
   box is 128 tall (M > 64), so a CTA's feed is not half A, unless 64-row tiles would outnumber the SMs (then
   the last wave's tiles run alone: 128 rows, stop 33's v11_width_sweep.md). Set from an H200 sweep (stop 32,
   benchmarks/results/v11_decode_sweep.md): a split costs more than its partials' traffic, and 48 CTAs of 128
   rows already pull ~3 TB/s, so the earlier rule (the split that minimized the busiest SM's K steps, S = 4 to 9
   at most shapes) lost 5 to 20% to S = 1 or 2. 16 x 4096 x 14336: 32 tiles, S = 2; 1 x 6144 x 4096: 48 tiles, no
   split; 128 x 4096 x 4096: 64 tiles of 64 rows, S = 2. The reduction is deterministic: each unit stores its
   fp32 partial (as [M, rows] with n contiguous, like C), a partition barrier, one gpu-scope acq_rel arrival per
   unit; the unit that arrives last (it reads S - 1) resets the counter for the next launch, sums the S partials
   in the order 0..S-1, as many tokens per round as keep S loads within 128 registers, and writes C. Whichever
   unit is last, the result is bitwise the same.
5. C written by masked stores (m < M, n < N) from a layout where each thread holds consecutive n of one token
   (C's contiguous dimension), so no TMA store box has to be transposed or trimmed.
Above SMALL_M the kernel, the decision table and the lean launch path are v10's, unchanged; so is M in 65..128
when v10's 128 x 256 tiles fill every SM (128 x 57344 x 8192: v10's path 1.03x the vendor, the decode path
0.90x). The dispatch is evaluated once per geometry inside `schedule`. SMALL_M = 0 turns the decode path off.

| geometry                                  | schedule                                                      |
|-------------------------------------------|---------------------------------------------------------------|
| M <= SMALL_M (128), unless v10 fills the SMs | decode: C^T tiles of 128 (64 if M > 64 and N <= 64 x SMs) n x M rounded up, split-K to fill HBM |
| M > SMALL_M, or M > 64 and v10's tiles >= SMs | v10's table: 128 x 256 tiles, half-width tiles, or split-K 2/4 |

Correctness at the edges: N and K need only be multiples of 8 (TMA strides); W's rows past N and K's tail past
the last full 64 arrive as zeros from TMA and add nothing; the stores mask n >= N and m >= M; a K range left
empty by the split (K steps not a multiple of S) publishes a zero partial and still arrives.

What to look for in SASS: `HGMMA.64xMx16.F32.BF16` (M the rounded token count) in the consumer, two `UTMALDG` in
the producer (W's box, A's box), no `UTMASTG`; in the split-K variant one `ATOMG.E.ADD.STRONG.GPU` after
`MEMBAR.ALL.GPU` and one `ATOMG.E.EXCH.STRONG.GPU` (the reset), the reducer's `LDG.E.128.STRONG.GPU` (ld.global.cg) partial reads, and no
local-memory traffic (tests/test_sm90_v11.py checks these).

Figures, compile-only (ptxas, sm_90a, evaluator static path): at every shape of benchmarks/llm_shapes.py --quick
0 spills, no stack, 160-184 KiB of shared memory on the decode path (v10's 168 registers and 224 KiB above it).
Measured on the H200 (stop 32, benchmarks/results/llm_shapes.md, eval --run, graph replay vs torch.matmul, at
the nine M <= 128 shapes of llm_shapes.py --quick): 0.935x to 1.040x, geometric mean 0.979x (with the first
split rule 0.709x to 1.026x, mean 0.863x); at three more Llama-3-70B M = 128 layers 0.700x (128 x 10240 x 8192:
160 tiles of 64 rows on 132 SMs, a second wave of 28 CTAs), 0.938x and 1.002x. Stop 33 (benchmarks/results/
llm_shapes.md, 31 shapes with M <= 128, the Llama-3-8B and -70B layers at M = 72, 96, 128 besides the quick set):
0.852x to 1.109x, geometric mean 0.983x, after the two fixes of items 2 and 4 (128 x 10240 x 8192 0.700x ->
0.947x, 96 x 10240 x 8192 0.647x -> 1.094x, 96 x 8192 x 8192 0.703x -> 0.979x). At M >= 1024 v11 is v10
(graph ratios within 0.1% of v10's). The goals of issue 25 (>= 1.0x at every M <= 128 shape, mean >= 1.1x) are
missed: where it is fastest the stage moves 3.7 to 4.4 TB/s (W and A read once, C written once, over graph
time), beside the vendor's 3.1 to 4.2, against a 4.8 TB/s datasheet peak. The first H200 run (stop 31) found
the outputs of every later call unwritten (the cached plan held the first call's C pointer); `call_arguments`
builds every per-call tensor argument each call since, and the GPU tests pass (tests/test_sm90_v11.py).

v10's own notes (its path is this stage's for M > 128):

v10 - a lean launch path, and a schedule chosen per shape (split-K with a deterministic reduction).

What this stage adds, on top of the tuned warp-specialized kernel of v09:
1. A lean launch path. v09 rebuilt three shared layouts (about 15 us each in Python) and three TMA descriptors
   and went through the JIT's argument binder on every call: 74-94 us of host time per call on the H200,
   against torch.matmul's 15-20 us, so every GEMM shorter than that ran at host speed. Here what depends only
   on the geometry (schedule, block shapes, layouts, grid, workspace, the compiled kernel and Triton's C
   launcher for it) is a `Plan` cached per (shapes, strides, dtypes, device, knobs); what depends on the data
   pointers too (the encoded CUtensorMaps and the whole argument tuple) is a `FastLaunch` cached per
   (pointers, geometry, knobs). A repeated call is one dictionary lookup and one call into the C launcher on the
   current stream (CompiledKernel.run would re-encode the three tensor maps every call; the raw launcher takes
   them encoded). The JIT path stays for the first call of a geometry (it compiles), for launch hooks
   (profilers), and for the compile-only driver; new pointers cost three descriptor records and three encodes.
2. A small decision table inside `launch`, evaluated once per geometry (never by timing at call time):

   | geometry (128 x 256 tiles vs 132 SMs)              | schedule                                              |
   |----------------------------------------------------|-------------------------------------------------------|
   | tiles >= SMs (every square benchmark shape)        | v09: 128 x 256 tiles, 4-stage ring, 4-way split epilogue |
   | tiles < SMs, 128 x 128 tiles fill >= half the SMs  | v09's half-width tile (128 x 128, 6-stage ring)       |
   | fewer tiles still, K >= 2 x MIN_SPLIT_STEPS steps  | split-K: S = 2 or 4 K ranges per 128 x 256 tile       |

   S is the smallest power of two that fills 3/4 of the SMs, keeping >= MIN_SPLIT_STEPS (16) K steps per range.
   The skinny benchmark shape 256 x 8192 x 8192 (64 full tiles, 128 half-width) takes the half-width row: on the
   H200, split-K there measured 0.80x the vendor under CUDA-graph replay against 0.99x for half-width tiles
   (benchmarks/results/sm90_v10_first.md), because both halves of every tile finish together and the fp32
   partial traffic (16 MiB written, 8 MiB read, all at the end) is not hidden behind any compute.
3. Split-K with a deterministic in-kernel reduction, for problems of very few tiles and long K. A work unit is
   (tile, K range). Every unit stores its fp32 partial to a workspace (column slices in the accumulator's own
   register layout, no shared memory), then one thread bumps the tile's arrival counter (a gpu-scope acq_rel
   atomic after a partition barrier: CUTLASS's semaphore pattern). The unit that arrives last adds the S
   partials in the fixed order 0, 1, ..., S - 1 (its own read back too) and TMA-stores the bf16 tile, so the
   result is bitwise the same whichever unit comes last. Counters are never reset: S is a power of two and a
   unit is last when (old + 1) % S == 0, which survives int32 wrap-around. No unit waits for another, so any
   grid is deadlock-free.

What to look for in SASS: v09's skeleton (`USETMAXREG`, HGMMA.64x256x16 in the consumers, UTMALDG in the
producer, 4 UTMASTG per tile; 2 per tile in the half-width schedule); in the split-K variant also 64 `STG.E.64`
of the fp32 partial slices, one `ATOMG.E.ADD.STRONG.GPU` per unit guarded to one thread and wrapped by the
acq_rel fences (`MEMBAR.ALL.GPU` before it, `CCTL.IVALL` after it), the reducer's `LDG.E.64.STRONG.GPU`
(ld.global.cg) reads of all S partials, and no local-memory traffic.

Figures, compile-only (ptxas -v, sm_90a): 168 registers at entry, 0 spills, 224 KiB shared in every schedule.
Measured on an H200 through the evaluator's runtime path (benchmarks/results/sm90_v10.md, host_launch.md,
2026-12-01, median of 3 rounds, per-call eager ratio to torch.matmul interleaved call by call): 0.993x at 4096^3,
1.021x at 8192^3, 1.008x at 8192x8192x2048, 1.013x at 16384x8192x4096, 0.983x at 256x8192x8192 (v09: 0.569x), geometric
mean 1.003x; under CUDA-graph replay 0.977-1.021x (geomean 1.005x); 97.5% tensor-pipe active at 8192^3. Host time
per call 12.7 us against torch.matmul's 21.5 us (v09: 78.8 us). Split-K at 512x1024x16384: 1.24x faster than
without it. The loop's A/B against v09 at 256x8192x8192: 3.06x, 95% CI [2.97, 3.14], accepted.
"""
from dataclasses import dataclass

import torch
import triton
from triton.backends.nvidia import driver as nvidia_driver
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
from triton.runtime.build import compile_module_from_src

# Gluon names that changed between Triton 3.6 and 3.9, resolved once from the installed release.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # renamed in 3.8
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global  # renamed in 3.8
barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # renamed in 3.7

STAGE = "v11"
TECHNIQUE = ("decode path for M <= 128: operands swapped (N fills wgmma's M, the tokens its N), A's box trimmed to "
             "the rows that exist, one consumer warpgroup, deep ring, split-K sized over all SMs; v10 above")
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
# The first shape is the benchmark shape, where the loop's A/B against the incumbent runs: a decode step of
# Llama-3-8B's MLP down projection (16 tokens), where this stage's step shows; then v10's five shapes.
SHAPES = [(16, 4096, 14336), (128, 28672, 4096), (1, 6144, 4096), (256, 8192, 8192), (4096, 4096, 4096),
          (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096)]
SHAPE_MULTIPLE = (1, 8, 8)  # TMA zero-fills partial boxes; row strides must be 16-byte multiples
# SPLIT_K: 0 = the decision table picks; 1 = never split (v09's schedule); 2 or 4 = force that split when K allows.
# SMALL_M: the largest M that takes the decode path (0 turns it off: v10 everywhere). SMALL_SPLIT_K as SPLIT_K,
# for the decode path (0 = the table picks from SMALL_SPLITS).
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 4, "GROUP_M": 8, "PRODUCER_REGS": 40,
         "EPILOGUE_SPLIT": 4, "FIT_GRID": 1, "SPLIT_K": 0, "MIN_SPLIT_STEPS": 16, "SMALL_M": 128,
         "SMALL_BLOCK_N": 0, "SMALL_SPLIT_K": 0, "SMALL_MIN_SPLIT_STEPS": 4, "SMALL_CHUNK_M": 0, "num_warps": 8}
# EPILOGUE_SPLIT stays 4: a 2-way split double-buffers two 128 x 128 bf16 C slices (64 KiB), which with the
# default 4-stage ring (4 x 48 KiB) needs 256 KiB of shared memory, over the 227 KiB limit; it fits only at
# NUM_STAGES = 3, and KNOB_CHOICES cannot pair values (the tune proposer sweeps every combination); as in v09.
KNOB_CHOICES = {"NUM_STAGES": [3, 4], "GROUP_M": [4, 8, 16], "SPLIT_K": [0, 1, 2, 4], "MIN_SPLIT_STEPS": [4, 16],
                "SMALL_M": [0, 64, 128], "SMALL_BLOCK_N": [0, 64, 128], "SMALL_SPLIT_K": [0, 1, 2, 3, 4, 8, 16],
                "SMALL_CHUNK_M": [0, 8, 32]}
MAX_SPLIT_K = 4
SMALL_SPLITS = tuple(range(1, 17))  # any S: the decode path's reducer resets its tile's counter
SMALL_WARPS = 4                   # one consumer warpgroup (the producer warp comes on top)
SMALL_SMEM_BYTES = 200 * 1024     # decode ring + epilogue scratch, under the 227 KiB a block may use
MAX_SMALL_STAGES = 12
SMALL_CHUNK_M = 8                 # fewest tokens the split-K reducer sums at a time
SMALL_A_BOX = 16                  # A's TMA box rows when M does not fill its ring slot (see small_a_box)
SMALL_REDUCE_REGS = 128           # registers the reducer's S loads in flight may take per thread
SMALL_FILL_ROWS = 48 * 128        # W rows in flight that saturate HBM (measured, see small_split)
ELEMENT_BYTES = 2
OPERAND_GL_DTYPE = gl.bfloat16
PLAN_CACHE_SIZE = 64         # geometries kept; cleared wholesale when full
FAST_CACHE_SIZE = 256        # prebuilt launches (pointer triples x geometries) kept; cleared when full


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
def unit_range(unit, num_tiles, k_steps, SPLIT_K: gl.constexpr):
    """Work unit -> (tile, split, first K step, end K step). Splits of one tile are num_tiles units apart."""
    if SPLIT_K == 1:
        tile = unit
        split = 0
        k_lo = 0
        k_hi = k_steps
    else:
        tile = unit % num_tiles
        split = unit // num_tiles
        per_split = gl.cdiv(k_steps, SPLIT_K)
        k_lo = gl.minimum(split * per_split, k_steps)
        k_hi = gl.minimum(k_lo + per_split, k_steps)
    return tile, split, k_lo, k_hi


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
def slice_offsets(BM: gl.constexpr, SUB_N: gl.constexpr, ROW: gl.constexpr, layout: gl.constexpr):
    """Element offsets of a [BM, SUB_N] slice inside a row-major [BM, ROW] workspace tile, in `layout`."""
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, SUB_N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * ROW + cols[None, :]


@gluon.jit
def reduce_slice(ws_ptr, tile_base, col0, offs, SPLIT_K: gl.constexpr, SLOT: gl.constexpr):
    """Sum of the SPLIT_K partials of one slice, read back in the fixed order 0, 1, ..., SPLIT_K - 1.

    The reducing unit reads its own partial back too (each thread the elements it stored itself, so program
    order makes them visible): no run-time branch, and its accumulator registers are free by now.
    """
    # .cg reads L2, where the other units' stores landed; the acquire on the counter ordered them.
    total = gl.load(ws_ptr + (tile_base + col0) + offs, cache_modifier=".cg")
    for s in gl.static_range(1, SPLIT_K):
        total = total + gl.load(ws_ptr + (tile_base + s * SLOT + col0) + offs, cache_modifier=".cg")
    return total


@gluon.jit
def producer(a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, ws_ptr, cnt_ptr, M, N, K,
             NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr,
             SPLIT_K: gl.constexpr):
    """One warp: for every (work unit, K step), wait until the slot is free, then start its two TMA copies."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
    for unit in range(gl.program_id(0), num_tiles * SPLIT_K, gl.num_programs(0)):
        tile, _, k_lo, k_hi = unit_range(unit, num_tiles, k_steps, SPLIT_K)
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_lo, k_hi):
            s = i % NUM_STAGES
            # Lap 0 passes at once (a fresh barrier is in the phase before 0); later laps wait for the consumers.
            mbarrier.wait(empty.index(s), ((i // NUM_STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma_load(a_desc, [pid_m * BLOCK_M, k * BLOCK_K], bar, a_smem.index(s))
            tma_load(b_desc, [pid_n * BLOCK_N, k * BLOCK_K], bar, b_smem.index(s))
            i += 1


@gluon.jit
def consumer(a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, ws_ptr, cnt_ptr, M, N, K,
             NUM_STAGES: gl.constexpr, GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr,
             SPLIT_K: gl.constexpr):
    """Two warpgroups: wgmma on each ready slot, release it once retired, then finish the unit's tile."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    SUB_N: gl.constexpr = c_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    # One EPILOGUE_SPLIT column slice of the accumulator is exactly the wgmma layout of an N = SUB_N tile.
    slice_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                           instr_shape=[16, SUB_N, 16])
    SLOT: gl.constexpr = BLOCK_M * BLOCK_N
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
    t = 0  # C slices stored so far: selects the staging buffer
    for unit in range(gl.program_id(0), num_tiles * SPLIT_K, gl.num_programs(0)):
        tile, split, k_lo, k_hi = unit_range(unit, num_tiles, k_steps, SPLIT_K)
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        for k in range(k_lo, k_hi):
            s = i % NUM_STAGES
            mbarrier.wait(ready.index(s), (i // NUM_STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), acc, is_async=True)
            acc, _, _ = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_smem.index(s), b_smem.index(s)))
            # Step i - 1 has retired in every warp once all have passed the wait: hand its slot back.
            barrier()
            mbarrier.arrive(empty.index((i + NUM_STAGES - 1) % NUM_STAGES), pred=k > k_lo)
            i += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        barrier()
        mbarrier.arrive(empty.index((i + NUM_STAGES - 1) % NUM_STAGES), pred=k_hi > k_lo)

        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if SPLIT_K == 1:
            out = acc.to(gl.bfloat16)
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
        else:
            # Split-K (launch guarantees EPILOGUE_SPLIT == 4): publish this unit's fp32 partial, count arrivals.
            lo, hi = split_columns(acc)
            q0, q1 = split_columns(lo)
            q2, q3 = split_columns(hi)
            q0 = gl.convert_layout(q0, slice_layout, assert_trivial=True)
            q1 = gl.convert_layout(q1, slice_layout, assert_trivial=True)
            q2 = gl.convert_layout(q2, slice_layout, assert_trivial=True)
            q3 = gl.convert_layout(q3, slice_layout, assert_trivial=True)
            offs = slice_offsets(BLOCK_M, SUB_N, BLOCK_N, slice_layout)
            tile_base = tile * (SPLIT_K * SLOT)
            mine = ws_ptr + (tile_base + split * SLOT)
            gl.store(mine + offs, q0)
            gl.store(mine + SUB_N + offs, q1)
            gl.store(mine + 2 * SUB_N + offs, q2)
            gl.store(mine + 3 * SUB_N + offs, q3)
            # Every consumer thread's stores precede the one release below (barrier, then one atomic).
            barrier()
            old = gl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if ((old + 1) & (SPLIT_K - 1)) == 0:
                r0 = reduce_slice(ws_ptr, tile_base, 0, offs, SPLIT_K, SLOT)
                store_slice(c_desc, c_smem, r0.to(gl.bfloat16), off_m, off_n, t)
                r1 = reduce_slice(ws_ptr, tile_base, SUB_N, offs, SPLIT_K, SLOT)
                store_slice(c_desc, c_smem, r1.to(gl.bfloat16), off_m, off_n + SUB_N, t + 1)
                r2 = reduce_slice(ws_ptr, tile_base, 2 * SUB_N, offs, SPLIT_K, SLOT)
                store_slice(c_desc, c_smem, r2.to(gl.bfloat16), off_m, off_n + 2 * SUB_N, t + 2)
                r3 = reduce_slice(ws_ptr, tile_base, 3 * SUB_N, offs, SPLIT_K, SLOT)
                store_slice(c_desc, c_smem, r3.to(gl.bfloat16), off_m, off_n + 3 * SUB_N, t + 3)
                t += 4
    tma.store_wait(pendings=0)


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_desc, ws_ptr, cnt_ptr, M, N, K, NUM_STAGES: gl.constexpr,
                GROUP_M: gl.constexpr, PRODUCER_REGS: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr,
                SPLIT_K: gl.constexpr, num_warps: gl.constexpr):
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
        (consumer, (a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, ws_ptr, cnt_ptr,
                    M, N, K, NUM_STAGES, GROUP_M, EPILOGUE_SPLIT, SPLIT_K)),
        (producer, (a_desc, b_desc, c_desc, a_smem, b_smem, c_smem, ready, empty, ws_ptr, cnt_ptr,
                    M, N, K, NUM_STAGES, GROUP_M, EPILOGUE_SPLIT, SPLIT_K)),
    ], worker_num_warps=[1], worker_num_regs=[PRODUCER_REGS])
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


# ---------------------------------------------------------------------------------------------------------------
# The decode path (M <= SMALL_M): C^T = B @ A^T, so N fills wgmma's 64-row M side and the few tokens are its N.


@gluon.jit
def small_unit_range(unit, num_tiles, k_steps, SPLIT_K: gl.constexpr):
    """Decode work unit -> (tile, split, first K step, end K step); S ranges of a tile differ by <= 1 step."""
    tile = unit % num_tiles
    split = unit // num_tiles
    return tile, split, split * k_steps // SPLIT_K, (split + 1) * k_steps // SPLIT_K


@gluon.jit
def small_producer(a_desc, b_desc, a_smem, b_smem, ready, empty, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc,
                   NUM_STAGES: gl.constexpr, SPLIT_K: gl.constexpr, CHUNK_M: gl.constexpr,
                   A_LOADS: gl.constexpr):
    """One warp: for every (work unit, K step), wait for a free slot, then copy B's rows and all of A's rows."""
    A_BOX: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_NB: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = b_desc.block_type.shape[1]
    num_tiles = gl.cdiv(N, BLOCK_NB)
    k_steps = gl.cdiv(K, BLOCK_K)
    i = 0
    for unit in range(gl.program_id(0), num_tiles * SPLIT_K, gl.num_programs(0)):
        tile, _, k_lo, k_hi = small_unit_range(unit, num_tiles, k_steps, SPLIT_K)
        for k in range(k_lo, k_hi):
            s = i % NUM_STAGES
            mbarrier.wait(empty.index(s), ((i // NUM_STAGES) & 1) ^ 1)
            bar = ready.index(s)
            # A's rows arrive in A_LOADS boxes that stop at M (to 16 rows): a box overhanging M is filled with zeros
            # far slower than real rows load (stop 33: 72 x 8192 x 8192 took 1.6x the time of 128 x 8192 x 8192).
            # Rows past the last box are never written; they meet only C^T's columns past M, which are not stored.
            mbarrier.expect(bar, A_LOADS * a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma_load(b_desc, [tile * BLOCK_NB, k * BLOCK_K], bar, b_smem.index(s))
            for r in gl.static_range(A_LOADS):
                tma_load(a_desc, [r * A_BOX, k * BLOCK_K], bar, a_smem.index(s).slice(r * A_BOX, A_BOX))
            i += 1


@gluon.jit
def small_consumer(a_desc, b_desc, a_smem, b_smem, ready, empty, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc,
                   NUM_STAGES: gl.constexpr, SPLIT_K: gl.constexpr, CHUNK_M: gl.constexpr,
                   A_LOADS: gl.constexpr):
    """One warpgroup: wgmma (B tile x A^T) on each ready slot, then C^T's tile written back transposed."""
    BLOCK_MA: gl.constexpr = a_smem.shape[1]
    BLOCK_NB: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = b_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                         instr_shape=[16, BLOCK_MA, 16])
    # Rows of C^T are C's contiguous dimension: each thread holds BLOCK_NB / 32 consecutive n of one token.
    out_layout: gl.constexpr = gl.BlockedLayout([BLOCK_NB // 32, 1], [32, 1], [1, gl.num_warps()], [0, 1])
    SLOT: gl.constexpr = BLOCK_NB * BLOCK_MA
    num_tiles = gl.cdiv(N, BLOCK_NB)
    k_steps = gl.cdiv(K, BLOCK_K)
    n_loc = gl.arange(0, BLOCK_NB, layout=gl.SliceLayout(1, out_layout))
    i = 0
    for unit in range(gl.program_id(0), num_tiles * SPLIT_K, gl.num_programs(0)):
        tile, split, k_lo, k_hi = small_unit_range(unit, num_tiles, k_steps, SPLIT_K)
        acc = gl.zeros([BLOCK_NB, BLOCK_MA], gl.float32, acc_layout)
        for k in range(k_lo, k_hi):
            s = i % NUM_STAGES
            mbarrier.wait(ready.index(s), (i // NUM_STAGES) & 1)
            acc = warpgroup_mma(b_smem.index(s), a_smem.index(s).permute((1, 0)), acc, is_async=True)
            acc, _, _ = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_smem.index(s), b_smem.index(s)))
            barrier()
            mbarrier.arrive(empty.index((i + NUM_STAGES - 1) % NUM_STAGES), pred=k > k_lo)
            i += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        barrier()
        mbarrier.arrive(empty.index((i + NUM_STAGES - 1) % NUM_STAGES), pred=k_hi > k_lo)

        n_idx = tile * BLOCK_NB + n_loc
        if SPLIT_K == 1:
            out = gl.convert_layout(acc.to(gl.bfloat16), out_layout)
            m_idx = gl.arange(0, BLOCK_MA, layout=gl.SliceLayout(0, out_layout))
            mask = (n_idx < N)[:, None] & (m_idx < M)[None, :]
            gl.store(c_ptr + m_idx[None, :] * ldc + n_idx[:, None], out, mask=mask)
        else:
            # Publish the fp32 partial as [BLOCK_MA, BLOCK_NB] (n contiguous, like C), then count arrivals.
            rows = gl.arange(0, BLOCK_NB, layout=gl.SliceLayout(1, acc_layout))
            cols = gl.arange(0, BLOCK_MA, layout=gl.SliceLayout(0, acc_layout))
            tile_base = tile * (SPLIT_K * SLOT)
            gl.store(ws_ptr + (tile_base + split * SLOT) + cols[None, :] * BLOCK_NB + rows[:, None], acc)
            # Every consumer thread's stores precede the one release below (barrier, then one atomic).
            barrier()
            old = gl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if old == SPLIT_K - 1:
                # Every unit of this tile has arrived, so none touches the counter again in this launch:
                # reset it for the next one (kernel boundaries order the reset before that launch's adds).
                gl.atomic_xchg(cnt_ptr + tile, 0, sem="relaxed", scope="gpu")
                # The last unit sums the SPLIT_K partials in the fixed order 0..SPLIT_K-1, CHUNK_M tokens at a
                # time, in the store layout (the barrier above made this CTA's own partial visible to it).
                for m0 in gl.static_range(0, BLOCK_MA, CHUNK_M):
                    m_idx = m0 + gl.arange(0, CHUNK_M, layout=gl.SliceLayout(0, out_layout))
                    offs = m_idx[None, :] * BLOCK_NB + n_loc[:, None]
                    total = gl.load(ws_ptr + tile_base + offs, cache_modifier=".cg")
                    for p in gl.static_range(1, SPLIT_K):
                        total = total + gl.load(ws_ptr + (tile_base + p * SLOT) + offs, cache_modifier=".cg")
                    mask = (n_idx < N)[:, None] & (m_idx < M)[None, :]
                    gl.store(c_ptr + m_idx[None, :] * ldc + n_idx[:, None], total.to(gl.bfloat16), mask=mask)


@gluon.jit
def small_kernel(a_desc, b_desc, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc, NUM_STAGES: gl.constexpr,
                 PRODUCER_REGS: gl.constexpr, SPLIT_K: gl.constexpr, CHUNK_M: gl.constexpr,
                 A_ROWS: gl.constexpr, A_LOADS: gl.constexpr, num_warps: gl.constexpr):
    # A's ring slot is A_ROWS tall (the wgmma N, M rounded up to a power of two); its descriptor's box is shorter.
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES, A_ROWS, BLOCK_K], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (small_consumer, (a_desc, b_desc, a_smem, b_smem, ready, empty, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc,
                          NUM_STAGES, SPLIT_K, CHUNK_M, A_LOADS)),
        (small_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, c_ptr, ws_ptr, cnt_ptr, M, N, K, ldc,
                          NUM_STAGES, SPLIT_K, CHUNK_M, A_LOADS)),
    ], worker_num_warps=[1], worker_num_regs=[PRODUCER_REGS])
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))
        mbarrier.invalidate(empty.index(i))


# ---------------------------------------------------------------------------------------------------------------
# Host side: the decision table, a plan per geometry, and a launch per (pointers, geometry) that rebuilds nothing.


@dataclass(frozen=True)
class Schedule:
    """What the decision table picked for one problem geometry."""

    block_n: int
    num_stages: int
    epilogue_split: int
    split_k: int
    grid: int
    why: str
    swap_ab: bool = False    # the decode path: C^T = B @ A^T
    block_m: int = 0         # decode path: A's ring-slot rows (M rounded up), the wgmma N
    a_box: int = 0           # decode path: rows of A's TMA box; ceil(M / a_box) boxes fill a slot's rows < M
    chunk_m: int = 0         # decode path under split-K: tokens the reducer sums per round


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of the device; 132 (H100/H200 SXM) when compiling without a GPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def choose_split(tiles: int, k_steps: int, sms: int, min_steps: int) -> int:
    """Smallest power of two S <= MAX_SPLIT_K that fills 3/4 of the SMs, keeping >= min_steps K steps per range."""
    split = 1
    while tiles * split * 4 < sms * 3 and split * 2 <= MAX_SPLIT_K and k_steps >= split * 2 * min_steps:
        split *= 2
    return split


def small_block_m(M: int) -> int:
    """A's ring-slot rows on the decode path: M rounded up to a power of two, at least 16 (the wgmma N)."""
    return max(16, triton.next_power_of_2(M))


def small_a_box(M: int, block_m: int) -> int:
    """Rows of A's TMA box on the decode path: the whole slot when M fills it, else 16, so the boxes that carry
    A's M rows overhang M by fewer than 16 (a box past M is zero-filled, and far slower than a real load)."""
    return block_m if M >= block_m else min(SMALL_A_BOX, block_m)


def small_split(tiles: int, block_n: int, k_steps: int, min_steps: int) -> int:
    """The smallest S in SMALL_SPLITS that puts SMALL_FILL_ROWS of W's rows in flight at once (tiles x S x
    block_n), each range keeping >= min_steps K steps.

    Measured on the H200 (stop 32, benchmarks/results/v11_decode_sweep.md): a split costs more than its
    partials' traffic (each unit's partial out, the last unit's reads, and a pipeline restart per unit), and
    48 CTAs streaming 128 rows each already pull ~3 TB/s, so splitting past that fill only loses.
    """
    for split in SMALL_SPLITS:
        if split > 1 and k_steps < split * min_steps:
            return split - 1
        if tiles * split * block_n >= SMALL_FILL_ROWS:
            return split
    return SMALL_SPLITS[-1]


def small_block_n(block_m: int, N: int, sms: int, SMALL_BLOCK_N: int) -> int:
    """W's rows per tile on the decode path: the knob, or (0) 64 when A's box is as tall as W's (M > 64), so a
    CTA's feed is not half A, unless 64-row tiles outnumber the SMs: then the tiles past the first wave run
    alone at the end, and 128 rows win. Measured on the H200 (stop 33, benchmarks/results/v11_width_sweep.md,
    the table's split): 64 rows lead at every N <= 64 x 132 (M = 128: 128 x 8192 x 8192 0.94x the vendor vs
    0.80x at 128 rows), 128 rows at every N above (128 x 10240 x 8192 0.91x vs 0.70x, 128 x 28672 x 4096 0.99x
    vs 0.90x)."""
    if SMALL_BLOCK_N:
        return SMALL_BLOCK_N
    return 64 if block_m >= 128 and triton.cdiv(N, 64) <= sms else 128


def reducer_chunk(block_m: int, split: int) -> int:
    """Tokens the split-K reducer sums per round: as many as keep its S loads in flight within SMALL_REDUCE_REGS
    registers (each round waits for one L2 round trip, so fewer rounds is a shorter tail)."""
    chunk = SMALL_CHUNK_M
    while chunk * 2 <= block_m and chunk * 2 * split <= SMALL_REDUCE_REGS:
        chunk *= 2
    return min(chunk, block_m)


def small_schedule(M: int, N: int, K: int, sms: int, BLOCK_K: int, SMALL_BLOCK_N: int, SMALL_SPLIT_K: int,
                   SMALL_MIN_SPLIT_STEPS: int, SMALL_CHUNK_M: int = 0) -> Schedule:
    """The decode rows of the decision table (M <= SMALL_M): tile, ring depth, split and grid."""
    block_m = small_block_m(M)
    block_n = small_block_n(block_m, N, sms, SMALL_BLOCK_N)
    tiles = triton.cdiv(N, block_n)
    k_steps = triton.cdiv(K, BLOCK_K)
    stage_bytes = (block_n + block_m) * BLOCK_K * ELEMENT_BYTES
    stages = min(MAX_SMALL_STAGES, (SMALL_SMEM_BYTES - block_n * block_m * 2) // stage_bytes)
    if SMALL_SPLIT_K == 0:
        split = small_split(tiles, block_n, k_steps, SMALL_MIN_SPLIT_STEPS)
    else:
        split = SMALL_SPLIT_K if SMALL_SPLIT_K in SMALL_SPLITS and k_steps >= SMALL_SPLIT_K else 1
    chunk = min(block_m, SMALL_CHUNK_M) if SMALL_CHUNK_M else reducer_chunk(block_m, split)
    return Schedule(block_n, stages, 1, split, min(sms, tiles * split),
                    f"decode: {block_m}-row A box, {tiles} tiles of {block_n} n, split-K {split}",
                    swap_ab=True, block_m=block_m, chunk_m=chunk, a_box=small_a_box(M, block_m))


def schedule(M: int, N: int, K: int, sms: int, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, NUM_STAGES: int,
             EPILOGUE_SPLIT: int, FIT_GRID: int, SPLIT_K: int, MIN_SPLIT_STEPS: int, SMALL_M: int = 0,
             SMALL_BLOCK_N: int = 0, SMALL_SPLIT_K: int = 0, SMALL_MIN_SPLIT_STEPS: int = 4,
             SMALL_CHUNK_M: int = 0) -> Schedule:
    """The decision table of the module docstring."""
    # The decode path, unless A's box would be as tall as v10's tile and v10's tiles fill every SM: there v10's
    # path holds the vendor (128 x 57344 x 8192 on the H200, stop 32: v10 1.02x, the decode path 0.90x).
    v10_fills = small_block_m(M) >= BLOCK_M and triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N) >= sms
    if M <= SMALL_M and not v10_fills:
        return small_schedule(M, N, K, sms, BLOCK_K, SMALL_BLOCK_N, SMALL_SPLIT_K, SMALL_MIN_SPLIT_STEPS,
                              SMALL_CHUNK_M)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    half = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, max(1, BLOCK_N // 2))
    k_steps = triton.cdiv(K, BLOCK_K)
    if not FIT_GRID or tiles >= sms:
        return Schedule(BLOCK_N, NUM_STAGES, EPILOGUE_SPLIT, 1, min(sms, tiles), "tiles fill the SMs")
    if SPLIT_K == 0:
        split = choose_split(tiles, k_steps, sms, MIN_SPLIT_STEPS) if half * 2 < sms else 1
    else:
        split = SPLIT_K if SPLIT_K in (1, 2, 4) and k_steps >= SPLIT_K else 1
    if split > 1:
        return Schedule(BLOCK_N, NUM_STAGES, 4, split, min(sms, tiles * split),
                        f"split-K {split}: {tiles} tiles, {half} half-width tiles")
    if BLOCK_N > 128:
        # v09's fallback: half-width tiles, same C slice width, the ring keeps its bytes with 1.5x the slots.
        return Schedule(BLOCK_N // 2, NUM_STAGES * 3 // 2, max(1, EPILOGUE_SPLIT // 2), 1, min(sms, half),
                        f"half-width tiles: {tiles} tiles")
    return Schedule(BLOCK_N, NUM_STAGES, EPILOGUE_SPLIT, 1, min(sms, tiles), "no better schedule")


@dataclass
class Plan:
    """Everything one geometry needs: schedule, block shapes, layouts, workspace, and the kernel once compiled."""

    sched: Schedule
    fn: object               # the @gluon.jit kernel: gemm_kernel (v10's path) or small_kernel (decode)
    blocks: tuple            # block shapes of the operands that get descriptors (A, B[, C])
    layouts: tuple           # their shared-memory layouts
    scalars: tuple           # every argument after this call's tensors: geometry only, never a call's tensor
    num_warps: int
    kernel: object = None    # the CompiledKernel, after the first launch on a GPU
    raw: object = None       # Triton's C launcher for it, without the per-call descriptor expansion


@dataclass(frozen=True)
class FastLaunch:
    """One (pointers, geometry, knobs): the C launcher and every argument it takes but the stream, prebuilt."""

    kernel: object
    raw: object
    grid: int
    device: int
    current_stream: object
    tail: tuple

    def __call__(self):
        self.raw(self.grid, 1, 1, self.current_stream(self.device), *self.tail)


_PLANS: dict = {}
_FAST: dict = {}


def workspace(device, tiles: int, split: int, slot: int) -> tuple:
    """Split-K's fp32 partials (one slot per work unit) and arrival counters, zeroed once: v10's path never resets
    them (S a power of two); the decode path's reducer resets its tile's counter (any S)."""
    if split > 1:
        return (torch.empty(tiles * split * slot, dtype=torch.float32, device=device),
                torch.zeros(tiles, dtype=torch.int32, device=device))
    return torch.empty(1, dtype=torch.float32, device=device), torch.zeros(1, dtype=torch.int32, device=device)


def make_plan(a, b, c, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, GROUP_M, PRODUCER_REGS, EPILOGUE_SPLIT, FIT_GRID,
              SPLIT_K, MIN_SPLIT_STEPS, SMALL_M, SMALL_BLOCK_N, SMALL_SPLIT_K, SMALL_MIN_SPLIT_STEPS,
              SMALL_CHUNK_M, num_warps) -> Plan:
    M, K = a.shape
    N = b.shape[0]
    sched = schedule(M, N, K, num_sms(a.device), BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, EPILOGUE_SPLIT,
                     FIT_GRID, SPLIT_K, MIN_SPLIT_STEPS, SMALL_M, SMALL_BLOCK_N, SMALL_SPLIT_K, SMALL_MIN_SPLIT_STEPS,
                     SMALL_CHUNK_M)
    if sched.swap_ab:
        tiles = triton.cdiv(N, sched.block_n)
        ws, cnt = workspace(a.device, tiles, sched.split_k, sched.block_n * sched.block_m)
        # A's box is a_box rows of the slot's block_m; the slot's swizzle depends only on its 128-byte rows.
        blocks = ([sched.a_box, BLOCK_K], [sched.block_n, BLOCK_K])
        layouts = tuple(gl.NVMMASharedLayout.get_default_for(blk, OPERAND_GL_DTYPE) for blk in blocks)
        return Plan(sched=sched, fn=small_kernel, blocks=blocks, layouts=layouts, num_warps=SMALL_WARPS,
                    scalars=(ws, cnt, M, N, K, c.stride(0), sched.num_stages, PRODUCER_REGS, sched.split_k,
                             sched.chunk_m, sched.block_m, triton.cdiv(M, sched.a_box), SMALL_WARPS))
    sub_n = sched.block_n // sched.epilogue_split
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, sched.block_n)
    ws, cnt = workspace(a.device, tiles, sched.split_k, BLOCK_M * sched.block_n)
    blocks = ([BLOCK_M, BLOCK_K], [sched.block_n, BLOCK_K], [BLOCK_M, sub_n])
    layouts = tuple(gl.NVMMASharedLayout.get_default_for(blk, dtype)
                    for blk, dtype in zip(blocks, (OPERAND_GL_DTYPE, OPERAND_GL_DTYPE, gl.bfloat16)))
    return Plan(sched=sched, fn=gemm_kernel, blocks=blocks, layouts=layouts, num_warps=num_warps,
                scalars=(ws, cnt, M, N, K, sched.num_stages, GROUP_M, PRODUCER_REGS, sched.epilogue_split,
                         sched.split_k, num_warps))


def raw_launcher(kernel):
    """Triton's C launcher for `kernel` (the one CompiledKernel.run wraps), or None where this path does not apply.

    CompiledKernel.run turns every host TensorDescriptor into a CUtensorMap (cuTensorMapEncodeTiled) on every
    call; the raw launcher takes the encoded maps, so a FastLaunch encodes them once.
    """
    md = kernel.metadata
    if md.global_scratch_size or md.profile_scratch_size or getattr(md, "num_ctas", 1) != 1:
        return None
    if not hasattr(nvidia_driver, "make_launcher"):  # Triton 3.6 generates this C source; 3.7 on has no such step
        return None
    names = kernel.src.fn.arg_names
    constants = {((names.index(k),) if isinstance(k, str) else k): v for k, v in kernel.src.constants.items()}
    source = nvidia_driver.make_launcher(constants, dict(kernel.src.signature), md.tensordesc_meta)
    return compile_module_from_src(src=source, name="__triton_launcher", library_dirs=nvidia_driver.library_dirs(),
                                   include_dirs=nvidia_driver.include_dirs, libraries=nvidia_driver.libraries).launch


def fast_launch(plan: Plan, args: tuple, device: int) -> FastLaunch:
    """Prebuild everything one launch passes to the C launcher, descriptors encoded, for these exact arguments."""
    kernel = plan.kernel
    metas = iter(kernel.metadata.tensordesc_meta or [None] * len(plan.blocks))
    flat = []
    for arg, ty in zip(args, kernel.src.signature.values()):
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            flat.extend(nvidia_driver.make_tensordesc_arg(arg, next(metas)))
        else:
            flat.append(arg)
    md = kernel.metadata
    tail = (kernel.function, md.launch_cooperative_grid, md.launch_pdl, None, None, kernel.packed_metadata, None,
            None, None, *flat)
    return FastLaunch(kernel=kernel, raw=plan.raw, grid=plan.sched.grid, device=device,
                      current_stream=triton.runtime.driver.active.get_current_stream, tail=tail)


def call_arguments(plan: Plan, a, b, c) -> tuple:
    """Every kernel argument of one call: this call's tensors (descriptors, and C's pointer on the decode path),
    then the plan's. The plan is shared by every call of a geometry, so it must hold no tensor of a call: the
    first H200 run had C's pointer in it and wrote every later call's output into the first call's C."""
    descs = tuple(TensorDescriptor.from_tensor(t, blk, lay) for t, blk, lay in zip((a, b, c), plan.blocks,
                                                                                       plan.layouts))
    return descs + ((c,) if plan.sched.swap_ab else ()) + plan.scalars


def launch_slow(key: tuple, a, b, c, knobs: tuple):
    """First launch of these pointers: plan (once per geometry), descriptors, JIT launch or a new FastLaunch."""
    plan = _PLANS.get(key[3:])
    if plan is None:
        if len(_PLANS) >= PLAN_CACHE_SIZE:
            _PLANS.clear()
        plan = _PLANS[key[3:]] = make_plan(a, b, c, *knobs)
    args = call_arguments(plan, a, b, c)
    hooked = bool(triton.knobs.runtime.launch_enter_hook.calls)
    if plan.kernel is None or not a.is_cuda or hooked:
        # First call of this geometry (compiles), a compile-only driver, or a profiler hook: the JIT's own path.
        kernel = plan.fn[(plan.sched.grid,)](*args[:-1], num_warps=plan.num_warps)
        if a.is_cuda and plan.kernel is None:
            plan.kernel = kernel
            plan.raw = raw_launcher(kernel)
        return kernel
    if plan.raw is None:
        plan.kernel.run(plan.sched.grid, 1, 1, triton.runtime.driver.active.get_current_stream(a.get_device()),
                        plan.kernel.function, plan.kernel.packed_metadata, None, None, None, *args)
        return plan.kernel
    if len(_FAST) >= FAST_CACHE_SIZE:
        _FAST.clear()
    fast = _FAST[key] = fast_launch(plan, args, a.get_device())
    fast()
    return plan.kernel


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           NUM_STAGES: int, GROUP_M: int, PRODUCER_REGS: int, EPILOGUE_SPLIT: int, FIT_GRID: int, SPLIT_K: int,
           MIN_SPLIT_STEPS: int, SMALL_M: int, SMALL_BLOCK_N: int, SMALL_SPLIT_K: int, SMALL_MIN_SPLIT_STEPS: int,
           SMALL_CHUNK_M: int, num_warps: int):
    """C = A @ B^T. Returns the compiled kernel so callers can read registers and spills."""
    knobs = (BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, GROUP_M, PRODUCER_REGS, EPILOGUE_SPLIT, FIT_GRID, SPLIT_K,
             MIN_SPLIT_STEPS, SMALL_M, SMALL_BLOCK_N, SMALL_SPLIT_K, SMALL_MIN_SPLIT_STEPS, SMALL_CHUNK_M, num_warps)
    key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), a.shape, b.shape, c.shape, a.stride(), b.stride(), c.stride(),
           a.dtype, c.dtype, a.get_device(), knobs)
    fast = _FAST.get(key)
    if fast is not None and not triton.knobs.runtime.launch_enter_hook.calls:
        fast()
        return fast.kernel
    return launch_slow(key, a, b, c, knobs)
