"""The MFMA layout of an earlier lesson, imported by a later one with `importlib.import_module("foreign_05-mfma")`
(its name is no Python identifier, as with Triton's numbered tutorials)."""
from triton.experimental.gluon import language as gl


def mfma_layout(num_warps: int):
    return gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                warps_per_cta=[num_warps // 2, 2])
