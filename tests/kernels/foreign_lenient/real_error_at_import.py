"""A module-level mistake that no GPU would fix: still an import error, at its line."""
import triton
import triton.language as tl

CONFIGS = {"BLOCK": 256}
BLOCK_M = CONFIGS["BLOCK_M"]


@triton.jit
def noop_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))


def noop(x):
    noop_kernel[(1,)](x, BLOCK=256)
