"""What every target's static cost model returns: a steady-state estimate of one hot-loop iteration.

A target's model (`evaluator.targets.amd.model`, `evaluator.targets.nvidia.model`) replays the compiled
loop body in order for `ITERATIONS` iterations and hands the iteration start times and stall totals to
`steady_state`, which gives

    estimated_efficiency = matrix-unit cycles per iteration / steady-state iteration cycles

the counterpart of the seed's MFMA efficiency. Every figure here is a static estimate
(docs/static-model.md lists the constants and what the models leave out).
"""
from __future__ import annotations

from dataclasses import dataclass

ITERATIONS = 8          # replayed iterations; the last half gives the steady state


@dataclass(frozen=True)
class LoopEstimate:
    matrix_cycles: int
    iteration_cycles: float
    estimated_efficiency: float
    bound: str                      # what the model says limits the loop
    stall_cycles: dict

    def to_dict(self) -> dict:
        return {"kind": "static_estimate", "matrix_cycles_per_iteration": self.matrix_cycles,
                "estimated_iteration_cycles": round(self.iteration_cycles, 1),
                "estimated_efficiency": round(self.estimated_efficiency, 4), "bound": self.bound,
                "stall_cycles": {k: round(v, 1) for k, v in self.stall_cycles.items()}}


def steady_state(matrix: int, times: list[float], stalls: dict) -> LoopEstimate:
    """The estimate from iteration start times (ITERATIONS + 1 of them) and stall cycles summed over the replay."""
    half = len(times) // 2
    per_iter = (times[-1] - times[half]) / max(1, len(times) - 1 - half)
    per_iter = max(per_iter, 1.0)
    eff = min(1.0, matrix / per_iter) if matrix else 0.0
    steady = {k: v / ITERATIONS for k, v in stalls.items()}
    bound = "matrix" if eff > 0.9 else max(steady, key=steady.get) if any(steady.values()) else "issue"
    return LoopEstimate(matrix, per_iter, eff, bound, steady)
