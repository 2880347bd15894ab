"""The seed article's published figures, measured by its authors on an MI355X (not by nearpeak).

Source: the seed (AMD's gfx950 Gluon GEMM article), as tabulated in the project's LADDERS.md. v05's
figures are the stock-scheduler ones; v09 lists the table value (the article's text also quotes 1489).
"""
from __future__ import annotations

GFX950_FP16 = {
    "v00": {"tflops": 541, "mfma_efficiency": 0.255},
    "v01": {"tflops": 546, "mfma_efficiency": 0.264},
    "v02": {"tflops": 672, "mfma_efficiency": 0.328},
    "v03": {"tflops": 770, "mfma_efficiency": 0.414},
    "v04": {"tflops": 1123, "mfma_efficiency": 0.577},
    "v05": {"tflops": 1128, "mfma_efficiency": 0.584},
    "v06": {"tflops": 1167, "mfma_efficiency": 0.866},
    "v07": {"tflops": 1423, "mfma_efficiency": 0.975},
    "v08": {"tflops": 1408, "mfma_efficiency": 0.978},
    "v09": {"tflops": 1421, "mfma_efficiency": 0.987},
}

GFX950_LOW_PRECISION = {
    "bf8": {"tflops": 3257, "mfma_efficiency": 0.997},
    "mxfp4": {"tflops": 5255, "mfma_efficiency": 0.924},
}

# Stages whose published figures the static estimate is ranked against: the whole ladder (`nearpeak ladder`).
CORRELATION_STAGES = ("v00", "v01", "v02", "v03", "v04", "v05", "v06", "v07", "v08", "v09", "bf8", "mxfp4")

PUBLISHED_BY = "the seed authors' figures measured on an MI355X with custom Triton builds, not nearpeak's"
