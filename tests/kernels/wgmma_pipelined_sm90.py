"""Team-written test kernel: a software-pipelined wgmma GEMM in the style of Triton's Gluon Hopper tutorials.

Compiled only (never run on a GPU here); the static tests use it to check that the hot loop found in its SASS
is the K loop. One CTA computes one BLOCK_M x BLOCK_N tile. A ring of NUM_STAGES shared-memory slots has two
mbarriers per slot: `ready` (the TMA copy landed) and `empty` (the MMA that read the slot retired). The load
for step k + NUM_STAGES - 1 is issued at the top of step k, after waiting on its slot's `empty` barrier, so
the copies run NUM_STAGES - 1 steps ahead of the MMAs; each step waits on two barriers, which ptxas turns into
two try-wait loops with out-of-line retry stubs.
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
def pipelined_gemm(a_desc, b_desc, c_desc, K, NUM_STAGES: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
        mbarrier.arrive(empty.index(i), count=1)  # every slot starts free
    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    steps = gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes

    for j in gl.static_range(NUM_STAGES - 1):  # fill the ring
        mbarrier.wait(empty.index(j), 0)
        mbarrier.expect(ready.index(j), nbytes, pred=j < steps)
        tma_load(a_desc, [off_m, j * BLOCK_K], ready.index(j), a_ring.index(j), pred=j < steps)
        tma_load(b_desc, [off_n, j * BLOCK_K], ready.index(j), b_ring.index(j), pred=j < steps)

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    for k in range(steps):
        p = k + NUM_STAGES - 1  # the step whose copies start now
        ps = p % NUM_STAGES
        mbarrier.wait(empty.index(ps), (p // NUM_STAGES) & 1)
        mbarrier.expect(ready.index(ps), nbytes, pred=p < steps)
        tma_load(a_desc, [off_m, p * BLOCK_K], ready.index(ps), a_ring.index(ps), pred=p < steps)
        tma_load(b_desc, [off_n, p * BLOCK_K], ready.index(ps), b_ring.index(ps), pred=p < steps)

        s = k % NUM_STAGES
        mbarrier.wait(ready.index(s), (k // NUM_STAGES) & 1)
        acc = warpgroup_mma(a_ring.index(s), b_ring.index(s).permute((1, 0)), acc, is_async=True)
        acc, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a_ring.index(s), b_ring.index(s)))
        mbarrier.arrive(empty.index(s), count=1)

    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma_store(c_desc, [off_m, off_n], c_smem)
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
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    return pipelined_gemm[grid](a_desc, b_desc, c_desc, K, NUM_STAGES, num_warps=num_warps)
