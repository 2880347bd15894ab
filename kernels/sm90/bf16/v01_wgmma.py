"""v01 - warpgroup MMA (wgmma) with operands in shared memory.

What this stage adds: Hopper's own tensor-core instruction. `wgmma.mma_async` is issued by a warpgroup (four
consecutive warps) and reads its operands straight from shared memory through a matrix descriptor, so the
per-warp register copies of A and B that `mma.sync` needed disappear. The kernel still loads A and B with plain
global loads, but now writes them into NVMMA-swizzled shared memory (128-byte swizzle, 64-byte at BLOCK_K = 32:
conflict-free for the stores and the layout the tensor core expects), fences the generic-proxy stores against the
async proxy (`fence.proxy.async`), and issues one wgmma per K step with the 128 x 128 accumulator in registers.

Why: on Hopper only wgmma reaches the full tensor-core rate; a 64 x 128 x 16 wgmma does per instruction what
32 `HMMA.16816` do. LADDERS.md measured a naive kernel of this kind at about 380 TFLOP/s (0.56x torch.matmul).

What to look for in SASS: `HGMMA.64x128x16.F32.BF16` (eight per K step: two 64-row halves x four k16), bracketed by
`WARPGROUP.ARRIVE` and `WARPGROUP.DEPBAR` (the wgmma is waited on at once: synchronous), `STS.128` into the
swizzled tile, `FENCE.VIEW.ASYNC.S` and `BAR.SYNC`. No LDSM any more: the tensor core reads shared memory itself.
The accumulator is 64 fp32 registers per thread (128x128 over 128 threads).

Figures at 4096^3 with the default knobs, compile-only on Triton 3.6.0 (ptxas -v, sm_90a): 229 registers, 0 spills, 32 KiB shared, 8
HGMMA.64x128x16 per K step. Measured on an H200 (benchmarks/results/sm90_bf16_ladder.json, 2026-11-29; do_bench
medians, torch.matmul side by side): 300 TFLOP/s at 4096^3 (0.42x), 304 at 8192^3 (0.45x), 32% tensor-pipe active.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma

STAGE = "v01"
TECHNIQUE = "wgmma with both operands in NVMMA-swizzled shared memory"
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
SHAPE_MULTIPLE = (128, 128, 64)  # no masks: every dimension must be a whole number of tiles
KNOBS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4}
KNOB_CHOICES = {"BLOCK_N": [64, 128], "BLOCK_K": [32, 64]}


@gluon.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, SMEM_LAYOUT: gl.constexpr,
                num_warps: gl.constexpr):
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [num_warps, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    a_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, BLOCK_K], SMEM_LAYOUT)
    b_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, BLOCK_K], SMEM_LAYOUT)

    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    rows_a = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_layout))
    rows_b = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, load_layout))
    cols_k = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load_layout))
    a_ptrs = a_ptr + rows_a[:, None] * K + cols_k[None, :]
    b_ptrs = b_ptr + rows_b[:, None] * K + cols_k[None, :]

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    for _k in range(0, K, BLOCK_K):
        a_smem.store(gl.load(a_ptrs))
        b_smem.store(gl.load(b_ptrs))
        fence_async_shared()  # make the generic-proxy stores visible to the tensor core (async proxy)
        # B is stored N x K (K-major); the transposed view is what wgmma's B descriptor wants.
        acc = warpgroup_mma(a_smem, b_smem.permute((1, 0)), acc)
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
    assert M % BLOCK_M == 0 and N % BLOCK_N == 0 and K % BLOCK_K == 0, "v01 handles whole tiles only"
    # The widest swizzle a BLOCK_K row allows: 128 bytes at BLOCK_K = 64, 64 bytes at 32 (a 128-byte swizzle
    # needs 128-byte rows; forcing it on 64-byte rows fails to compile).
    smem_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.bfloat16)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    return gemm_kernel[grid](a, b, c, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, smem_layout, num_warps=num_warps)
