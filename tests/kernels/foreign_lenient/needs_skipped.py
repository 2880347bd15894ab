"""The host function needs what a skipped statement would have made (a CUDA tensor at import), and a second
host function is defined under a decorator that synchronizes the GPU: both fail, each naming the skipped line."""
import torch
import triton
import triton.language as tl

SCALE = torch.ones(1, device="cuda")


def on_gpu_only(fn):
    torch.cuda.synchronize()
    return fn


@triton.jit
def scale_kernel(x_ptr, s_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * tl.load(s_ptr))


def scale(x):
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, SCALE, BLOCK=256)
    return x


@on_gpu_only
def scale_twice(x):
    return scale(scale(x))
