"""The H200's SM clock under load, as nearpeak's runtime read it: the sm90 clock model (evaluator.targets.clock).

Pairs (measured TFLOP/s, SM clock in MHz read by nvidia-smi right after the timed calls) from the 31 correct
records of benchmarks/results/sm90_knob_variants_h200.jsonl (H200, bf16 4096^3; tests/test_clock_model.py checks
them against that file). A kernel's tensor-pipe utilisation is its TFLOP/s over the peak at the clock it ran at:
132 SMs x 4096 FLOP per clock (the datasheet's 989.4 TFLOP/s at 1.83 GHz). The clock ceiling is the 1980 MHz
maximum the same records report. Measured figures, used as a fit: the clock line is in-sample on these kernels.
"""
from __future__ import annotations

from ...clock import ClockModel, ClockPair, fit_clock

PEAK_TFLOPS_PER_GHZ = 989.4 / 1.83          # bf16 dense, one H100/H200 SXM
MAX_CLOCK_GHZ = 1.98
SOURCE = ("H200 SM clock read after timing by nearpeak's runtime, 31 bf16 kernels at 4096^3 "
          "(benchmarks/results/sm90_knob_variants_h200.jsonl): measured, least-squares line in tensor-pipe utilisation")

# (label, measured TFLOP/s, SM MHz after timing)
MEASURED = (
    ("v00 variant 1", 96.6, 1980),
    ("v01 variant 2", 222.1, 1935),
    ("v02 variant 3", 398.2, 1695),
    ("v02 variant 4", 413.1, 1785),
    ("v03 variant 5", 624.5, 1545),
    ("v03 variant 6", 474.9, 1680),
    ("v03 variant 7", 426.3, 1635),
    ("v04 variant 8", 649.5, 1575),
    ("v04 variant 9", 620.6, 1515),
    ("v04 variant 10", 438.3, 1620),
    ("v05 variant 11", 600.5, 1530),
    ("v05 variant 12", 681.3, 1755),
    ("v06 variant 13", 632.6, 1545),
    ("v06 variant 14", 682.3, 1590),
    ("v07 variant 15", 475.5, 1785),
    ("v07 variant 16", 497.2, 1710),
    ("v08 variant 17", 484.6, 1770),
    ("v08 variant 18", 513.3, 1695),
    ("v08 variant 19", 716.3, 1575),
    ("v09 variant 20", 692.1, 1590),
    ("v09 variant 21", 691.9, 1575),
    ("v00 default 22", 153.0, 1980),
    ("v01 default 23", 291.2, 1890),
    ("v02 default 24", 530.3, 1695),
    ("v03 default 25", 661.8, 1515),
    ("v04 default 26", 653.0, 1485),
    ("v05 default 27", 669.9, 1575),
    ("v06 default 28", 749.8, 1590),
    ("v07 default 29", 688.3, 1755),
    ("v08 default 30", 754.4, 1725),
    ("v09 default 31", 697.8, 1575),
)


def pairs() -> list[ClockPair]:
    return [ClockPair(label, tflops / (PEAK_TFLOPS_PER_GHZ * mhz / 1000), mhz / 1000) for label, tflops, mhz in MEASURED]


CLOCK: ClockModel = fit_clock(pairs(), MAX_CLOCK_GHZ, SOURCE)
