"""Allocates a CUDA workspace at import, as benchmark-first tutorials do, and never uses it: without a GPU the
scorer leaves that statement out (listed with its line, cause `no_gpu`) and scores `copy`."""
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
