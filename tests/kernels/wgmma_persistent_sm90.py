"""Team-written test kernel: a persistent wgmma GEMM whose copies run ahead across tiles (Gluon tutorial style).

Compiled only (never run on a GPU here); the static tests use it to check that the hot loop found in its SASS
is the K loop, not the tile loop around it. The grid is one CTA per SM; each CTA walks tiles
pid, pid + grid, ... . A producer counter runs over (tile, k-step) pairs independently of the consumer, so the
K loop of one tile already issues the first copies of the CTA's next tile (the ring never drains between
tiles). The epilogue stores through shared memory with a TMA store that is only awaited before the next
tile's epilogue reuses the buffer.
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

TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (512, 512, 1024)]
SHAPE_MULTIPLE = (1, 8, 8)
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": 4, "num_warps": 4}


@gluon.jit
def produce(a_desc, b_desc, a_ring, b_ring, ready, prod, tile, step, grid_n, pred,
            NUM_STAGES: gl.constexpr):
    """Start the copies of K-step `step` of `tile` into ring slot prod % NUM_STAGES (skipped if not pred)."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    s = prod % NUM_STAGES
    mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma_load(a_desc, [(tile // grid_n) * BLOCK_M, step * BLOCK_K], ready.index(s),
                                    a_ring.index(s), pred=pred)
    tma_load(b_desc, [(tile % grid_n) * BLOCK_N, step * BLOCK_K], ready.index(s),
                                    b_ring.index(s), pred=pred)


@gluon.jit
def persistent_gemm(a_desc, b_desc, c_desc, M, N, K, NUM_STAGES: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)

    grid_n = gl.cdiv(N, BLOCK_N)
    tiles = gl.cdiv(M, BLOCK_M) * grid_n
    steps = gl.cdiv(K, BLOCK_K)
    first = gl.program_id(0)
    stride = gl.num_programs(0)
    # Producer position: (p_tile, p_step), with prod the running count of copies issued.
    p_tile = first
    p_step = 0
    prod = 0
    for _fill in gl.static_range(NUM_STAGES - 1):
        produce(a_desc, b_desc, a_ring, b_ring, ready, prod, p_tile, p_step, grid_n, p_tile < tiles, NUM_STAGES)
        prod += 1
        p_step += 1
        wrap = p_step == steps
        p_tile = gl.where(wrap, p_tile + stride, p_tile)
        p_step = gl.where(wrap, 0, p_step)

    cons = 0
    for tile in range(first, tiles, stride):
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        for k in range(steps):
            s = cons % NUM_STAGES
            mbarrier.wait(ready.index(s), (cons // NUM_STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(s), b_ring.index(s).permute((1, 0)), acc, is_async=True)
            acc, _a, _b = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_ring.index(s), b_ring.index(s)))
            cons += 1
            # The slot of step cons - 2 is free now; refill the ring, possibly with the next tile's first steps.
            produce(a_desc, b_desc, a_ring, b_ring, ready, prod, p_tile, p_step, grid_n, p_tile < tiles, NUM_STAGES)
            prod += 1
            p_step += 1
            wrap = p_step == steps
            p_tile = gl.where(wrap, p_tile + stride, p_tile)
            p_step = gl.where(wrap, 0, p_step)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))

        tma.store_wait(pendings=0)  # the previous tile's store has read c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [(tile // grid_n) * BLOCK_M, (tile % grid_n) * BLOCK_N], c_smem)
    tma.store_wait(pendings=0)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           NUM_STAGES: int, num_warps: int):
    """C = A @ B^T."""
    M, K = a.shape
    N = b.shape[0]
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.bfloat16))
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_K], gl.bfloat16))
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N],
                                          gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], gl.bfloat16))
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.device.type == "cuda" else 132
    grid = (min(sms, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)),)
    return persistent_gemm[grid](a_desc, b_desc, c_desc, M, N, K, NUM_STAGES, num_warps=num_warps)
