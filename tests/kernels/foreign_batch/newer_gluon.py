"""Written for a Gluon that has `gl.constexpr_function` (newer than Triton 3.6.0): the scorer must name the
missing attribute and the installed Triton version, and say the file may target another one."""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gl.constexpr_function
def block_for(n):
    return 64 if n >= 64 else 32


@gluon.jit
def fill_kernel(c_ptr, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [64], [4], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    gl.store(c_ptr + offs, gl.zeros((BLOCK,), gl.float16, layout))


def fill(c):
    fill_kernel[(triton.cdiv(c.numel(), 64),)](c, BLOCK=64, num_warps=4)
    return c
