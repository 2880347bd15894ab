"""The engine clock a static estimate turns cycles into time with: a function of matrix-unit load.

Power-limited GPUs slow their clock as the matrix units fill: the seed's own pairs imply ~2.0 GHz for its naive
stage (25.5% MFMA-busy) and ~1.4 GHz for its best (98.7%) on a part rated 2.4 GHz; the H200 was read at
1.5-1.9 GHz under load against a 1.98 GHz maximum. A `ClockModel` is a straight line in the share of the
matrix pipe kept busy, clamped to [floor, ceiling], fitted by least squares on (utilisation, clock) pairs
(`fit_clock`), and says where its pairs came from. A target without pairs uses its datasheet clock at every
load and says that it is not validated (`datasheet_clock`).

The line must keep TFLOP/s rising with utilisation (u x clock(u) increasing on [0, 1]), so that a busier
loop is never estimated slower: `fit_clock` checks it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClockModel:
    intercept_ghz: float            # clock at zero matrix load (before clamping)
    slope_ghz: float                # change per unit of utilisation (negative: slower when busier)
    floor_ghz: float
    ceiling_ghz: float
    source: str                     # where the fitted pairs come from, or "datasheet clock, not validated"
    validated: bool
    fitted_on: int = 0              # number of pairs
    leave_one_out_error: float | None = None   # median |relative error| of the TFLOP/s each left-out pair implies

    def at(self, utilisation: float) -> float:
        """The clock, GHz, at a matrix-unit utilisation in [0, 1]."""
        u = min(1.0, max(0.0, utilisation))
        return min(self.ceiling_ghz, max(self.floor_ghz, self.intercept_ghz + self.slope_ghz * u))

    def to_dict(self) -> dict:
        return {"intercept_ghz": round(self.intercept_ghz, 4), "slope_ghz": round(self.slope_ghz, 4),
                "floor_ghz": round(self.floor_ghz, 4), "ceiling_ghz": self.ceiling_ghz, "source": self.source,
                "validated": self.validated, "fitted_on": self.fitted_on,
                "leave_one_out_error": self.leave_one_out_error}


def datasheet_clock(ghz: float) -> ClockModel:
    """The datasheet clock at every load: what a target without measured clocks gets."""
    return ClockModel(ghz, 0.0, ghz, ghz, "datasheet clock, not validated", False)


@dataclass(frozen=True)
class ClockPair:
    """One measured point: the matrix-unit utilisation and the clock it ran at."""

    label: str
    utilisation: float
    clock_ghz: float


def _line(pairs: list[ClockPair]) -> tuple[float, float]:
    n = len(pairs)
    mu = sum(p.utilisation for p in pairs) / n
    mc = sum(p.clock_ghz for p in pairs) / n
    var = sum((p.utilisation - mu) ** 2 for p in pairs)
    slope = sum((p.utilisation - mu) * (p.clock_ghz - mc) for p in pairs) / var if var else 0.0
    return mc - slope * mu, slope


def _model(pairs: list[ClockPair], ceiling_ghz: float, source: str) -> ClockModel:
    intercept, slope = _line(pairs)
    floor = min(ceiling_ghz, intercept + slope) if slope < 0 else min(p.clock_ghz for p in pairs)
    if intercept + 2 * slope * 1.0 < 0 and slope < 0:   # d/du (u clock(u)) = intercept + 2 slope u
        raise ValueError(f"clock fit {intercept:.3f} {slope:+.3f} u would make a busier loop slower")
    return ClockModel(intercept, slope, floor, ceiling_ghz, source, True, len(pairs))


def fit_clock(pairs: list[ClockPair], ceiling_ghz: float, source: str) -> ClockModel:
    """The least-squares line through `pairs`, with the leave-one-out error of the TFLOP/s it implies: for each
    pair, the line fitted on the others predicts its clock, so its TFLOP/s (proportional to utilisation x clock)
    is off by predicted / measured - 1."""
    model = _model(pairs, ceiling_ghz, source)
    errors = sorted(abs(leave_one_out(pairs, i, ceiling_ghz).at(p.utilisation) / p.clock_ghz - 1)
                    for i, p in enumerate(pairs))
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
    return ClockModel(model.intercept_ghz, model.slope_ghz, model.floor_ghz, model.ceiling_ghz, source, True,
                      len(pairs), round(median, 4))


def leave_one_out(pairs: list[ClockPair], index: int, ceiling_ghz: float) -> ClockModel:
    """The clock line fitted on every pair but `index` (for out-of-sample figures of that pair)."""
    rest = [p for i, p in enumerate(pairs) if i != index]
    return _model(rest, ceiling_ghz, f"leave-one-out without {pairs[index].label}")
