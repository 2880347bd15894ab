"""The gfx950 clock under load, inferred from the seed's published pairs: the gfx950 clock model.

The seed publishes, for each of its ten fp16 stages at 4096x4096x8192, the TFLOP/s and the hot loop's MFMA
efficiency, both measured by its authors on an MI355X (evaluator.targets.gfx950.published). At a clock f the
matrix units deliver efficiency x 2516.6 TFLOP/s x f / 2.4 GHz, so each pair implies the clock the stage ran
at: ~2.0 GHz at 25.5% busy (v00), ~1.4 GHz at 98.7% (v09). The line through those ten points, in the share
of the matrix pipe kept busy, is the clock the static estimate uses; its leave-one-out error is reported
(`CLOCK.leave_one_out_error`, and per stage by benchmarks/static_model_fidelity.py). The implied clock also
absorbs what the hot-loop efficiency leaves out (epilogue, tail rounds): an effective clock, not a reading.
BF8 and MXFP4 are not used: they are the out-of-sample check.
"""
from __future__ import annotations

from ...clock import ClockModel, ClockPair, fit_clock
from .published import GFX950_FP16

DATASHEET_GHZ = 2.4
PEAK_TFLOPS_PER_GHZ = 2516.6 / DATASHEET_GHZ     # fp16 dense, MI355X datasheet
SOURCE = ("implied by the seed's ten published fp16 (TFLOP/s, MFMA efficiency) pairs on an MI355X: least-squares "
          "line in matrix-unit utilisation, leave-one-out error reported")


def pairs() -> list[ClockPair]:
    return [ClockPair(stage, f["mfma_efficiency"], f["tflops"] / (f["mfma_efficiency"] * PEAK_TFLOPS_PER_GHZ))
            for stage, f in GFX950_FP16.items()]


CLOCK: ClockModel = fit_clock(pairs(), DATASHEET_GHZ, SOURCE)
