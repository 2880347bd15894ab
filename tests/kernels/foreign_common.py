"""Helpers shared by the gfx950 fixture kernels, the way AMD's Gluon examples keep a common module beside them.

Not a kernel file itself: `foreign_sibling.py` imports it with a plain `from foreign_common import ...`.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


def blocked_load_layout(num_warps: int):
    """16-byte vectors along K: 4 lanes cover a 32-wide K slice, 16 lanes of a wave take 16 rows."""
    return gl.BlockedLayout([1, 8], [16, 4], [num_warps, 1], [1, 0])


@gluon.jit
def tile_pointers(base, row0, stride, ROWS: gl.constexpr, BLOCK_K: gl.constexpr, LAYOUT: gl.constexpr):
    rows = row0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, LAYOUT))
    ks = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, LAYOUT))
    return base + rows[:, None] * stride + ks[None, :]
