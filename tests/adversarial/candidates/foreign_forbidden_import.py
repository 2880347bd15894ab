"""Foreign file (no contract, scored with --entry matmul) whose host function starts a process.

Foreign files are judged by what they do: importing `subprocess` passes, running it from the file's code is
refused where it happens (`policy_violation`, rule `process_network_ffi`, at the `subprocess.run` line).
"""
import subprocess

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr):
    load_a: gl.constexpr = gl.BlockedLayout([1, 8], [16, 4], [4, 1], [1, 0])
    load_b: gl.constexpr = gl.BlockedLayout([8, 1], [4, 16], [1, 4], [0, 1])
    mfma: gl.constexpr = gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                              warps_per_cta=[2, 2])
    rm = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load_a))
    ka = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, load_a))
    kb = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, load_b))
    rn = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, load_b))
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mfma)
    for k in range(0, K, BLOCK_K):
        a = gl.load(a_ptr + rm[:, None] * stride_am + (k + ka)[None, :] * stride_ak)
        b = gl.load(b_ptr + (k + kb)[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc = gl.amd.cdna4.mfma(gl.convert_layout(a, gl.DotOperandLayout(0, mfma, 8)),
                                gl.convert_layout(b, gl.DotOperandLayout(1, mfma, 8)), acc)
    om = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mfma))
    on = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mfma))
    gl.store(c_ptr + om[:, None] * stride_cm + on[None, :] * stride_cn, acc.to(gl.float16))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4)
    subprocess.run(["true"], check=False)
    return c
