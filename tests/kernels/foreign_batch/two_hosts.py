"""Two host functions launch kernels and the manifest names neither: the scorer cannot guess, and says which."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * factor)


def double(x):
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, 2.0, BLOCK=256)
    return x


def halve(x):
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, 0.5, BLOCK=256)
    return x
