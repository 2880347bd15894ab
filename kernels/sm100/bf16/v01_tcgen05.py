"""v01 (sm100) - tcgen05: TMA loads into shared memory, the fifth-generation tensor core accumulating in TMEM.

What this stage adds (diff against v00)
---------------------------------------
* Operand tiles arrive by TMA (`tma_load`, completion on an mbarrier) in the NVMMA
  shared layout, instead of global loads converted through shared memory by every thread.
* `tcgen05_mma` multiplies the two shared-memory tiles into an accumulator that lives in tensor memory
  (TMEM, `allocate_tensor_memory`), not in registers: one thread issues it for the whole CTA, and
  `tcgen05_commit` arrives on an mbarrier when it is done. The accumulator is read into registers once,
  after the K loop (`acc_tmem.load`), for the epilogue.
* Nothing is pipelined yet: each K step waits for its loads, then for its MMA.

What to look for in SASS: `UTMALDG` (TMA loads), `UTCHMMA` (tcgen05 MMA), `SYNCS.PHASECHK` (mbarrier waits),
and far fewer registers than v00, since the accumulator is not in the register file.

Compile-only (nearpeak has not run on a Blackwell GPU): the figures nearpeak shows for it are static.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import blackwell
from triton.experimental.gluon.language.nvidia.blackwell import (
    TensorMemoryLayout,
    allocate_tensor_memory,
    mbarrier,
    tcgen05_commit,
    tcgen05_mma,
    tma,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime.jit import constexpr_function

# Gluon names that changed between Triton 3.6 and 3.9, resolved once from the installed release.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # renamed in 3.8


@constexpr_function
def descriptor_reg_layout(element_ty, shape, layout, num_warps):
    """From 3.8 the tensor-memory descriptor's type gives its tcgen05.ld register layout (32x32b)."""
    return blackwell.tensor_memory_descriptor_type(element_ty, shape, layout, shape).get_reg_layout(num_warps)


tmem_reg_layout = getattr(blackwell, "get_tmem_reg_layout", None) or descriptor_reg_layout  # moved in 3.8

STAGE = "v01"
TECHNIQUE = "tcgen05: TMA tiles, MMA accumulating in tensor memory (unpipelined)"
TARGET = "sm100"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (256, 8192, 8192)]
SHAPE_MULTIPLE = (1, 8, 8)  # TMA zero-fills partial boxes; row strides must be 16-byte multiples
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64]}


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_ptr, M, N, K, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    load_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(load_bar, count=1)
    mbarrier.init(mma_bar, count=1)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(BLOCK_M, BLOCK_N), col_stride=1)
    acc_tmem = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N], tmem_layout)

    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    phase = 0
    use_acc = False  # TMEM is not zeroed: the first MMA overwrites it
    for k in range(0, K, BLOCK_K):
        mbarrier.expect(load_bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma_load(a_desc, [off_m, k], load_bar, a_smem)
        tma_load(b_desc, [off_n, k], load_bar, b_smem)
        mbarrier.wait(load_bar, phase)
        tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc_tmem, use_acc=use_acc)
        tcgen05_commit(mma_bar)
        mbarrier.wait(mma_bar, phase)  # the MMA has read the tiles: the next loads may overwrite them
        use_acc = True
        phase ^= 1
    mbarrier.invalidate(load_bar)
    mbarrier.invalidate(mma_bar)

    acc = acc_tmem.load(tmem_reg_layout(gl.float32, (BLOCK_M, BLOCK_N), tmem_layout, num_warps))
    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(acc.to(gl.bfloat16), store_layout)
    rows_c = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
    cols_c = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_layout))
    mask = (rows_c[:, None] < M) & (cols_c[None, :] < N)
    gl.store(c_ptr + rows_c[:, None] * N + cols_c[None, :], out, mask=mask)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BLOCK_M: int = 128, BLOCK_N: int = 128,
           BLOCK_K: int = 64, num_warps: int = 4):
    """C = A @ B^T for A (M x K) and B (N x K), both K-contiguous; C is M x N row-major."""
    M, K = a.shape
    N = b.shape[0]
    a_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.bfloat16)
    b_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_K], gl.bfloat16)
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_N, BLOCK_K], b_layout)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    gemm_kernel[grid](a_desc, b_desc, c, M, N, K, num_warps=num_warps)
