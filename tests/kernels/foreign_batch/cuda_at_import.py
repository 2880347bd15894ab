"""Allocates a CUDA workspace at import, as benchmark-first tutorials do: without a GPU this is the file
touching the GPU at import, which the scorer must say instead of "Torch not compiled with CUDA enabled"."""
import torch
import triton
import triton.language as tl

WORKSPACE = torch.empty(1 << 20, device="cuda", dtype=torch.uint8)


@triton.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def copy(x):
    y = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](x, y, BLOCK=256)
    return y
