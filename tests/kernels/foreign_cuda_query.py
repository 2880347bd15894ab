"""
Host code that asks torch about the GPU, as Triton's tutorials do
=================================================================

`scale` picks its block size by `torch.cuda.get_device_capability()`, which the scorer answers for the
target it compiles for, GPU or not. `scale_and_wait` also waits for the device (`torch.cuda.synchronize`),
which has no answer without a GPU: CPU builds of torch say so with an `AssertionError` of their own. That is
the host code failing inside a library (`entry_error`), not the wrapper's own check failing (`contract_error`).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x):
    major, minor = torch.cuda.get_device_capability()
    block = 256 if (major, minor) >= (9, 0) else 128
    scale_kernel[(triton.cdiv(x.numel(), block),)](x, x.numel(), BLOCK=block)
    return x


def scale_and_wait(x):
    scale(x)
    torch.cuda.synchronize()
    return x
