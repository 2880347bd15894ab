"""What every target's static cost model returns: a steady-state estimate of one hot-loop iteration.

A target's model (`evaluator.targets.amd.model`, `evaluator.targets.nvidia.model`) replays the compiled
loop body in order for `ITERATIONS` iterations and hands the iteration start times and stall totals to
`steady_state`, which gives

    estimated_efficiency = matrix-unit cycles per iteration / steady-state iteration cycles

the counterpart of the seed's MFMA efficiency. The models also mark each barrier of the last replayed
iteration, so the iteration comes with its barrier-delimited segments: waves of one workgroup meet at every
barrier and can hide each other's stalls only inside a segment (evaluator.throughput). Every figure here is
a static estimate (docs/static-model.md lists the constants and what the models leave out).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ITERATIONS = 8          # replayed iterations; the last half gives the steady state


@dataclass(frozen=True)
class Segment:
    """The part of one iteration between two barriers, for one stream alone, in cycles."""

    cycles: float                   # wall time of the segment
    matrix: float                   # matrix-unit cycles of the matrix instructions issued in it
    issue: float                    # cycles spent issuing (the segment minus its stalls)


@dataclass
class SegmentMarks:
    """What a model records while it replays the last iteration: a cut at each barrier."""

    cuts: list[tuple[float, float, float]] = field(default_factory=list)  # (time, matrix so far, stalls so far)

    def cut(self, t: float, matrix: float, stalls: dict) -> None:
        self.cuts.append((t, matrix, sum(stalls.values())))

    def segments(self) -> tuple[Segment, ...]:
        out = []
        for (t0, m0, s0), (t1, m1, s1) in zip(self.cuts, self.cuts[1:]):
            if t1 > t0:
                out.append(Segment(t1 - t0, m1 - m0, max(0.0, (t1 - t0) - (s1 - s0))))
        return tuple(out)


@dataclass(frozen=True)
class LoopEstimate:
    matrix_cycles: int
    iteration_cycles: float
    estimated_efficiency: float
    bound: str                      # what the model says limits the loop
    stall_cycles: dict
    segments: tuple[Segment, ...] = ()   # barrier-delimited parts of one steady iteration (one if no barrier)
    lds_cycles: float = 0.0         # LDS pipe busy per iteration for this stream, at one wave's LDS rate

    def to_dict(self) -> dict:
        return {"kind": "static_estimate", "matrix_cycles_per_iteration": self.matrix_cycles,
                "estimated_iteration_cycles": round(self.iteration_cycles, 1),
                "estimated_efficiency": round(self.estimated_efficiency, 4), "bound": self.bound,
                "stall_cycles": {k: round(v, 1) for k, v in self.stall_cycles.items()}}


def steady_state(matrix: int, times: list[float], stalls: dict, marks: SegmentMarks | None = None,
                 lds_cycles: float = 0.0) -> LoopEstimate:
    """The estimate from iteration start times (ITERATIONS + 1 of them) and stall cycles summed over the replay;
    `marks` holds the last iteration's cuts (its start, each barrier, its end), `lds_cycles` the LDS pipe's
    busy cycles summed over the replay."""
    half = len(times) // 2
    per_iter = (times[-1] - times[half]) / max(1, len(times) - 1 - half)
    per_iter = max(per_iter, 1.0)
    eff = min(1.0, matrix / per_iter) if matrix else 0.0
    steady = {k: v / ITERATIONS for k, v in stalls.items()}
    bound = "matrix" if eff > 0.9 else max(steady, key=steady.get) if any(steady.values()) else "issue"
    segments = marks.segments() if marks else ()
    if segments:  # the last iteration's segments, scaled to the steady-state iteration
        scale = per_iter / sum(seg.cycles for seg in segments)
        segments = tuple(Segment(seg.cycles * scale, seg.matrix, min(seg.issue, seg.cycles * scale)) for seg in segments)
    return LoopEstimate(matrix, per_iter, eff, bound, steady, segments, lds_cycles / ITERATIONS)
