"""Helpers a fixture imports from outside its own folder (`--path ../foreign_utils`), as AMD's gfx950 stages
import `common` from `../../utils`."""
import os

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


def tile_from_env() -> tuple[int, int, int]:
    """BLOCK_M, BLOCK_N, BLOCK_K from TILE_MNK (e.g. "64,64,32"), which the stage's authors set in their shell."""
    return tuple(int(v) for v in os.environ["TILE_MNK"].split(","))


@gluon.jit
def mfma_step(a, b, acc, MFMA: gl.constexpr):
    return gl.amd.cdna4.mfma(gl.convert_layout(a, gl.DotOperandLayout(0, MFMA, 8)),
                             gl.convert_layout(b, gl.DotOperandLayout(1, MFMA, 8)), acc)
