"""
A host wrapper that asks torch for the GPU's compute capability, as some Triton tutorials do
=============================================================================================

`torch.cuda` has no answer on a machine without a CUDA build, and CPU builds of torch say so with an
`AssertionError` of their own. That is the host code failing inside a library (`entry_error`), not the
wrapper's own check failing (`contract_error`).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x):
    major, _ = torch.cuda.get_device_capability()
    block = 256 if major >= 9 else 128
    scale_kernel[(triton.cdiv(x.numel(), block),)](x, x.numel(), BLOCK=block)
    return x
