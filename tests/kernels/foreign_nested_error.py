"""A compile error two calls deep: the kernel calls a helper whose `gl.arange` has a length that is no power
of two. The scorer must point at the helper's line (the innermost one in this file), not the kernel's call."""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def row_offsets(row0, ROWS: gl.constexpr, LAYOUT: gl.constexpr):
    return row0 + gl.arange(0, ROWS + 3, layout=gl.SliceLayout(1, LAYOUT))


@gluon.jit
def fill_kernel(c_ptr, stride_cm, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [16, 4], [4, 1], [1, 0])
    rows = row_offsets(gl.program_id(0) * BLOCK, BLOCK, layout)
    cols = gl.arange(0, BLOCK, layout=gl.SliceLayout(0, layout))
    gl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], gl.zeros((BLOCK, BLOCK), gl.float16, layout))


def fill(c):
    fill_kernel[(triton.cdiv(c.shape[0], 64),)](c, c.stride(0), BLOCK=64, num_warps=4)
    return torch.zeros_like(c)
